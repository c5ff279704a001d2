/* SPDX-License-Identifier: Apache-2.0
 * planner: the JSON graph codec (see sp_graph_json.h, docs/graph-format.md).
 * common's JSON reader (cm_json_read) parses the document into a compact
 * tree freed at once; this file walks it once, building the module with the
 * IR API in the same order and with the same canonical attributes as
 * the MLIR reader (region bodies before their op, a function body before its
 * func.func), so that passes see identical IR from either syntax.
 * The current JSON Pointer is kept in a fixed buffer that grows and shrinks
 * as the walk descends; every error copies it, so reporting never allocates.
 * Value names live in a chained hash table whose chains are LIFO, so leaving a
 * region drops its names by popping entries. */
#include "sp_graph_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_json.h"
#include "cm_map.h"
#include "sp_ops.h"
#include "sp_shard.h"
#include "sp_mlir.h"

/* A function input's Flax logical axis names, as the plan shows them. */
typedef struct vlog_ent {
    uint32_t v;       /* a function input */
    const char *json; /* its "logical_axes" as compact JSON (arena) */
} vlog_ent;

struct sp_graph {
    sp_module *m;
    sp_custom_rules *rules;
    bool has_functions;
    const char **vnames; /* value id -> document name (arena), n_vnames entries */
    uint32_t n_vnames;
    vlog_ent *vlog; /* by increasing v */
    uint32_t n_vlog;
};

void sp_graph_limits_init(sp_graph_limits *l)
{
    l->max_bytes = (size_t)1 << 30;
    l->max_ops = 16u << 20;
    l->max_values = 32u << 20;
    l->max_rank = SP_MAX_RANK;
    l->max_dim = (int64_t)1 << 40;
    l->max_elems = (int64_t)1 << 48;
    l->max_depth = 32;
}

/* ---- decoder state ------------------------------------------------------------ */

typedef struct name_ent {
    const char *s; /* borrowed from the JSON document */
    uint32_t len;
    uint32_t value;
    uint32_t next; /* older entry of the same bucket, or SP_NONE */
} name_ent;

typedef struct u32v {
    uint32_t *v;
    uint32_t n, cap;
} u32v;

typedef struct dec {
    sp_module *m;
    sp_graph *g;
    const sp_graph_limits *lim;
    cm_error *err;
    cm_status st;
    char path[CM_ERROR_PATH_LEN];
    size_t path_len;
    /* names */
    name_ent *names;
    uint32_t n_names, cap_names;
    uint32_t *heads;
    uint32_t n_heads; /* power of two */
    /* scratch stacks shared by nested ops */
    u32v operands, types;
    sp_named_attr *attrs;
    uint32_t n_attrs, cap_attrs;
    /* document-level settings */
    const char *default_mesh; /* NULL: none (or ambiguous) */
    const cm_json *logical_rules;    /* borrowed, or NULL */
    uint32_t n_ops, n_values, depth;
    const char **vnames;
    uint32_t cap_vnames;
    vlog_ent *vlog; /* function inputs' logical axis names, by value */
    uint32_t n_vlog, cap_vlog;
    /* type text -> type id, so repeated types skip the MLIR type parser */
    struct tslot {
        const char *s; /* borrowed from the document */
        size_t len;
        uint32_t type;
    } *tcache;
    uint32_t n_tcache, cap_tcache; /* cap is a power of two */
} dec;

/* ---- errors and paths --------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static cm_status bad(dec *d, const char *fmt, ...)
{
    if (d->st != CM_OK) {
        return d->st;
    }
    va_list ap;
    va_start(ap, fmt);
    cm_error_setv(d->err, CM_EINVAL, d->path, fmt, ap);
    va_end(ap);
    d->st = CM_EINVAL;
    return CM_EINVAL;
}

static cm_status oom(dec *d)
{
    if (d->st == CM_OK) {
        cm_error_set(d->err, CM_ENOMEM, NULL, "out of memory while decoding the graph");
        d->st = CM_ENOMEM;
    }
    return d->st;
}

/* Appends "/key" (escaped per RFC 6901) and returns the previous length. */
static size_t push_key(dec *d, const char *key)
{
    size_t mark = d->path_len, n = d->path_len;
    char *p = d->path;
    if (n + 1 < sizeof d->path) {
        p[n++] = '/';
    }
    for (const char *k = key; *k != '\0' && n + 2 < sizeof d->path; k++) {
        if (*k == '~' || *k == '/') {
            p[n++] = '~';
            p[n++] = *k == '~' ? '0' : '1';
        } else {
            p[n++] = *k;
        }
    }
    p[n] = '\0';
    d->path_len = n;
    return mark;
}

static size_t push_idx(dec *d, size_t i)
{
    /* by hand, not snprintf: it runs for every element of every array */
    size_t mark = d->path_len;
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + i % 10);
        i /= 10;
    } while (i > 0);
    if (mark + 1 + n < sizeof d->path) {
        d->path[d->path_len++] = '/';
        while (n > 0) {
            d->path[d->path_len++] = digits[--n];
        }
        d->path[d->path_len] = '\0';
    }
    return mark;
}

static void pop(dec *d, size_t mark)
{
    d->path_len = mark;
    d->path[mark] = '\0';
}

static const char *json_kind(const cm_json *j)
{
    switch (cm_json_kind_of(j)) {
    case CM_JSON_OBJECT:
        return "an object";
    case CM_JSON_ARRAY:
        return "an array";
    case CM_JSON_STRING:
        return "a string";
    case CM_JSON_INT:
        return "an integer";
    case CM_JSON_REAL:
        return "a number";
    case CM_JSON_TRUE:
    case CM_JSON_FALSE:
        return "a boolean";
    case CM_JSON_NULL:
        return "null";
    }
    return "a value";
}

/* Checks that object o has only the listed members (NULL-terminated). */
static cm_status only_keys(dec *d, const cm_json *o, const char *const *keys)
{
    const char *k;
    for (size_t m1 = 0; (k = cm_json_key_at(o, m1, NULL)) != NULL; m1++) {
        bool ok = false;
        for (const char *const *q = keys; *q != NULL && !ok; q++) {
            ok = strcmp(*q, k) == 0;
        }
        if (!ok) {
            size_t mk = push_key(d, k);
            bad(d, "unknown member \"%s\"", k);
            pop(d, mk);
            return d->st;
        }
    }
    return CM_OK;
}

/* ---- small helpers -------------------------------------------------------------- */

/* MLIR's bare-id: [A-Za-z_][A-Za-z0-9_$.-]*, so the name prints as @name. */
static bool is_bare_id(const char *s, size_t n)
{
    if (n == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) {
        return false;
    }
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '$' || c == '.' || c == '-')) {
            return false;
        }
    }
    return true;
}

/* A mesh name: a bare-id as MLIR's lexer reads it after `@`
 * ([A-Za-z_][A-Za-z0-9_$.]*, no '-'), at most 255 bytes, so the plan's
 * module prints and reads back. */
static bool is_symbol_id(const char *s, size_t n)
{
    return n < 256 && is_bare_id(s, n) && memchr(s, '-', n) == NULL;
}

static void *arena(dec *d, size_t n)
{
    void *p = cm_arena_zalloc(&d->m->arena, n == 0 ? 1 : n);
    if (p == NULL) {
        oom(d);
    }
    return p;
}

static const char *astr(dec *d, const char *s, size_t n)
{
    const char *p = sp_module_str(d->m, s, n);
    if (p == NULL) {
        oom(d);
    }
    return p;
}

static sp_attr *new_attr(dec *d, sp_attr_kind k)
{
    sp_attr *a = sp_attr_new(d->m, k);
    if (a == NULL) {
        oom(d);
    }
    return a;
}

static sp_attr *str_attr(dec *d, const char *s, size_t n)
{
    sp_attr *a = new_attr(d, SP_ATTR_STRING);
    if (a != NULL) {
        a->u.str.s = astr(d, s, n);
        a->u.str.len = n;
    }
    return a;
}

static sp_attr *int_attr(dec *d, int64_t v, const char *type)
{
    sp_attr *a = new_attr(d, SP_ATTR_INT);
    if (a != NULL) {
        a->u.i.v = v;
        a->u.i.type = type;
    }
    return a;
}

static cm_status u32_push(dec *d, u32v *s, uint32_t x)
{
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 64;
        uint32_t *v = cm_realloc(s->v, sizeof(uint32_t) * cap);
        if (v == NULL) {
            return oom(d);
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return CM_OK;
}

static cm_status attr_push(dec *d, const char *name, sp_attr *a)
{
    if (a == NULL || d->st != CM_OK) {
        return d->st != CM_OK ? d->st : oom(d);
    }
    if (d->n_attrs == d->cap_attrs) {
        uint32_t cap = d->cap_attrs ? d->cap_attrs * 2 : 32;
        sp_named_attr *v = cm_realloc(d->attrs, sizeof(sp_named_attr) * cap);
        if (v == NULL) {
            return oom(d);
        }
        d->attrs = v;
        d->cap_attrs = cap;
    }
    d->attrs[d->n_attrs].name = name;
    d->attrs[d->n_attrs].value = a;
    d->n_attrs++;
    return CM_OK;
}

/* Moves the attributes pushed since mark into the arena. */
static sp_named_attr *pop_attrs(dec *d, uint32_t mark, uint32_t *n_out)
{
    uint32_t n = d->n_attrs - mark;
    *n_out = n;
    d->n_attrs = mark;
    if (n == 0) {
        return NULL;
    }
    sp_named_attr *a = cm_arena_memdup(&d->m->arena, d->attrs + mark, n, sizeof *a);
    if (a == NULL) {
        oom(d);
    }
    return a;
}

/* Reads an integer member; required members missing are an error. */
static cm_status get_int(dec *d, const cm_json *j, int64_t lo, int64_t hi, int64_t *out)
{
    if (!cm_json_is_int(j)) {
        return bad(d, "expected an integer, got %s", json_kind(j));
    }
    int64_t v = cm_json_int(j);
    if (v < lo || v > hi) {
        return bad(d, "%lld is out of range [%lld, %lld]", (long long)v, (long long)lo,
                   (long long)hi);
    }
    *out = (int64_t)v;
    return CM_OK;
}

static const char *get_str(dec *d, const cm_json *j, size_t *len_out)
{
    if (!cm_json_is_string(j)) {
        bad(d, "expected a string, got %s", json_kind(j));
        return NULL;
    }
    if (len_out != NULL) {
        *len_out = cm_json_str_len(j);
    }
    return cm_json_str(j);
}

/* ---- names --------------------------------------------------------------------- */

static uint32_t hash_name(const char *s, uint32_t n)
{
    return (uint32_t)cm_hash_bytes(s, n);
}

/* Strips one leading '%'. */
static void norm_name(const char **s, size_t *n)
{
    if (*n > 0 && (*s)[0] == '%') {
        (*s)++;
        (*n)--;
    }
}

static uint32_t names_find(const dec *d, const char *s, uint32_t n)
{
    if (d->n_heads == 0) {
        return SP_NONE;
    }
    uint32_t i = d->heads[hash_name(s, n) & (d->n_heads - 1)];
    while (i != SP_NONE) {
        const name_ent *e = &d->names[i];
        if (e->len == n && memcmp(e->s, s, n) == 0) {
            return e->value;
        }
        i = e->next;
    }
    return SP_NONE;
}

static cm_status names_rehash(dec *d, uint32_t n_heads)
{
    uint32_t *h = cm_alloc(sizeof(uint32_t) * n_heads);
    if (h == NULL) {
        return oom(d);
    }
    memset(h, 0xff, sizeof(uint32_t) * n_heads);
    for (uint32_t i = 0; i < d->n_names; i++) {
        uint32_t b = hash_name(d->names[i].s, d->names[i].len) & (n_heads - 1);
        d->names[i].next = h[b];
        h[b] = i;
    }
    cm_free(d->heads);
    d->heads = h;
    d->n_heads = n_heads;
    return CM_OK;
}

/* Records value names in the document-wide name table (for the plan). */
static cm_status note_vname(dec *d, uint32_t v, const char *s, size_t n)
{
    if (v >= d->cap_vnames) {
        uint32_t cap = d->cap_vnames ? d->cap_vnames : 1024;
        while (cap <= v) {
            cap *= 2;
        }
        const char **nv = cm_realloc(d->vnames, sizeof(char *) * cap);
        if (nv == NULL) {
            return oom(d);
        }
        memset(nv + d->cap_vnames, 0, sizeof(char *) * (cap - d->cap_vnames));
        d->vnames = nv;
        d->cap_vnames = cap;
    }
    d->vnames[v] = astr(d, s, n);
    return d->st;
}

/* Records the Flax logical axis names a function input v was given (for the
 * plan, which shows them beside the input's PartitionSpec). */
static cm_status note_vlogical(dec *d, uint32_t v, const cm_json *names)
{
    if (!cm_json_is_array(names)) {
        return d->st;
    }
    if (d->n_vlog == d->cap_vlog) {
        uint32_t cap = d->cap_vlog ? d->cap_vlog * 2 : 64;
        vlog_ent *nv = cm_realloc(d->vlog, sizeof(vlog_ent) * cap);
        if (nv == NULL) {
            return oom(d);
        }
        d->vlog = nv;
        d->cap_vlog = cap;
    }
    cm_buf txt;
    cm_buf_init(&txt);
    cm_json_put_value(&txt, names);
    const char *s = txt.oom ? NULL : astr(d, txt.data, txt.len);
    cm_buf_fini(&txt);
    if (s == NULL) {
        return oom(d);
    }
    d->vlog[d->n_vlog++] = (vlog_ent){v, s};
    return d->st;
}

/* Defines name j (a JSON string) for value v in the current scope. */
static cm_status define(dec *d, const cm_json *j, uint32_t v)
{
    size_t n;
    const char *s = get_str(d, j, &n);
    if (s == NULL) {
        return d->st;
    }
    norm_name(&s, &n);
    if (n == 0 || n > 1024) {
        return bad(d, "a value name must have 1 to 1024 characters");
    }
    if (names_find(d, s, (uint32_t)n) != SP_NONE) {
        return bad(d, "value \"%%%.*s\" is defined twice", (int)n, s);
    }
    if (d->n_names == d->cap_names) {
        uint32_t cap = d->cap_names ? d->cap_names * 2 : 256;
        name_ent *e = cm_realloc(d->names, sizeof(name_ent) * cap);
        if (e == NULL) {
            return oom(d);
        }
        d->names = e;
        d->cap_names = cap;
    }
    if (d->n_names + 1 > d->n_heads / 2 &&
        names_rehash(d, d->n_heads ? d->n_heads * 2 : 512) != CM_OK) {
        return d->st;
    }
    /* the table keys on the module's own copy of the name, not the JSON
     * string: decode_ops frees each op's JSON once it is decoded */
    if (note_vname(d, v, s, n) != CM_OK) {
        return d->st;
    }
    s = d->vnames[v];
    uint32_t b = hash_name(s, (uint32_t)n) & (d->n_heads - 1);
    name_ent *e = &d->names[d->n_names];
    e->s = s;
    e->len = (uint32_t)n;
    e->value = v;
    e->next = d->heads[b];
    d->heads[b] = d->n_names++;
    return CM_OK;
}

/* Drops the names defined since mark (LIFO per bucket). */
static void names_pop(dec *d, uint32_t mark)
{
    while (d->n_names > mark) {
        name_ent *e = &d->names[--d->n_names];
        d->heads[hash_name(e->s, e->len) & (d->n_heads - 1)] = e->next;
    }
}

static cm_status use(dec *d, const cm_json *j, uint32_t *v_out)
{
    size_t n;
    const char *s = get_str(d, j, &n);
    if (s == NULL) {
        return d->st;
    }
    norm_name(&s, &n);
    uint32_t v = n > 0 && n <= 1024 ? names_find(d, s, (uint32_t)n) : SP_NONE;
    if (v == SP_NONE) {
        return bad(d, "unknown value \"%%%.*s\" (values must be defined before use)",
                   (int)(n > 64 ? 64 : n), s);
    }
    *v_out = v;
    return CM_OK;
}

static cm_status count_value(dec *d)
{
    if (++d->n_values > d->lim->max_values) {
        return bad(d, "too many values (limit %u)", d->lim->max_values);
    }
    return CM_OK;
}

/* ---- types ------------------------------------------------------------------------ */

static cm_status check_tensor_limits(dec *d, const sp_type *t)
{
    if (t->kind != SP_TYPE_TENSOR) {
        return CM_OK;
    }
    if (t->rank > d->lim->max_rank) {
        return bad(d, "rank %u exceeds the limit of %u", t->rank, d->lim->max_rank);
    }
    int64_t elems = 1;
    for (uint32_t i = 0; i < t->rank; i++) {
        int64_t x = t->dims[i];
        if (x == SP_DIM_DYNAMIC) {
            continue;
        }
        if (x < 0 || x > d->lim->max_dim) {
            return bad(d, "dimension %u is %lld; dimensions must be in [0, %lld]", i,
                       (long long)x, (long long)d->lim->max_dim);
        }
        if (!cm_mul_i64(elems, x, &elems) || elems > d->lim->max_elems) {
            return bad(d, "the element count overflows the limit of %lld",
                       (long long)d->lim->max_elems);
        }
    }
    return CM_OK;
}

static const struct {
    const char *name;
    sp_elem e;
} dtype_alias[] = {
    {"bool", SP_ELEM_I1},       {"int8", SP_ELEM_I8},       {"int16", SP_ELEM_I16},
    {"int32", SP_ELEM_I32},     {"int64", SP_ELEM_I64},     {"uint8", SP_ELEM_UI8},
    {"uint16", SP_ELEM_UI16},   {"uint32", SP_ELEM_UI32},   {"uint64", SP_ELEM_UI64},
    {"bfloat16", SP_ELEM_BF16}, {"float16", SP_ELEM_F16},   {"float32", SP_ELEM_F32},
    {"float64", SP_ELEM_F64},   {"complex64", SP_ELEM_C64}, {"complex128", SP_ELEM_C128},
};

static bool dtype_of(const char *s, sp_elem *out)
{
    for (int e = SP_ELEM_I1; e <= SP_ELEM_INDEX; e++) {
        const char *n = sp_elem_name((sp_elem)e);
        if (n != NULL && strcmp(n, s) == 0) {
            *out = (sp_elem)e;
            return true;
        }
    }
    for (size_t i = 0; i < sizeof dtype_alias / sizeof dtype_alias[0]; i++) {
        if (strcmp(dtype_alias[i].name, s) == 0) {
            *out = dtype_alias[i].e;
            return true;
        }
    }
    return false;
}

static uint32_t hash_bytes(const char *s, size_t n)
{
    return (uint32_t)cm_hash_bytes(s, n);
}

static bool tcache_get(const dec *d, const char *s, size_t n, uint32_t *out)
{
    if (d->cap_tcache == 0) {
        return false;
    }
    for (uint32_t i = hash_bytes(s, n) & (d->cap_tcache - 1);; i = (i + 1) & (d->cap_tcache - 1)) {
        const struct tslot *t = &d->tcache[i];
        if (t->s == NULL) {
            return false;
        }
        if (t->len == n && memcmp(t->s, s, n) == 0) {
            *out = t->type;
            return true;
        }
    }
}

/* A failed insert only costs speed. */
static void tcache_put(dec *d, const char *s, size_t n, uint32_t type)
{
    if ((d->n_tcache + 1) * 2 > d->cap_tcache) {
        uint32_t cap = d->cap_tcache ? d->cap_tcache * 2 : 64;
        struct tslot *t = cm_calloc(cap, sizeof *t);
        if (t == NULL) {
            return;
        }
        for (uint32_t i = 0; i < d->cap_tcache; i++) {
            if (d->tcache[i].s != NULL) {
                uint32_t j = hash_bytes(d->tcache[i].s, d->tcache[i].len) & (cap - 1);
                while (t[j].s != NULL) {
                    j = (j + 1) & (cap - 1);
                }
                t[j] = d->tcache[i];
            }
        }
        cm_free(d->tcache);
        d->tcache = t;
        d->cap_tcache = cap;
    }
    /* keyed on a copy in the module: the JSON text it came from is freed
     * op by op (decode_ops) */
    const char *key = sp_module_str(d->m, s, n);
    if (key == NULL) {
        return;
    }
    uint32_t j = hash_bytes(key, n) & (d->cap_tcache - 1);
    while (d->tcache[j].s != NULL) {
        j = (j + 1) & (d->cap_tcache - 1);
    }
    d->tcache[j] = (struct tslot){key, n, type};
    d->n_tcache++;
}

/* A type: MLIR text ("tensor<8x16xf32>") or {"shape": [8, 16], "dtype": "f32"}. */
static cm_status decode_type(dec *d, const cm_json *j, uint32_t *out)
{
    if (cm_json_is_string(j) && tcache_get(d, cm_json_str(j), cm_json_str_len(j), out)) {
        return CM_OK;
    }
    if (cm_json_is_string(j)) {
        cm_error e;
        cm_error_clear(&e);
        cm_status st = sp_mlir_parse_type(d->m, cm_json_str(j), cm_json_str_len(j), out,
                                          &e);
        if (st == CM_ENOMEM) {
            return oom(d);
        }
        if (st != CM_OK) {
            const char *col = strchr(e.path, ':');
            return bad(d, "expected an MLIR type like \"tensor<8x16xf32>\": %s (col %s)", e.msg,
                       col != NULL ? col + 1 : "?");
        }
        const sp_type *t = &d->m->types[*out];
        if (strncmp(t->text, "tensor<", 7) == 0 &&
            ((t->kind == SP_TYPE_OTHER && strncmp(t->text, "tensor<*", 8) != 0) ||
             strstr(t->text, "<-") != NULL || strstr(t->text, "x-") != NULL)) {
            return bad(d, "malformed tensor type \"%s\" (dimensions must be sizes >= 0 or ?)",
                       t->text);
        }
        if (check_tensor_limits(d, t) != CM_OK) {
            return d->st;
        }
        tcache_put(d, cm_json_str(j), cm_json_str_len(j), *out);
        return CM_OK;
    }
    if (!cm_json_is_object(j)) {
        return bad(d, "expected a type: \"tensor<8x16xf32>\" or {\"shape\": [8, 16], \"dtype\": "
                      "\"f32\"}, got %s",
                   json_kind(j));
    }
    static const char *const keys[] = {"shape", "dtype", NULL};
    if (only_keys(d, j, keys) != CM_OK) {
        return d->st;
    }
    const cm_json *shape = cm_json_get(j, "shape"), *dt = cm_json_get(j, "dtype");
    size_t mk = push_key(d, "dtype");
    sp_elem elem;
    if (dt == NULL) {
        pop(d, mk);
        return bad(d, "missing member \"dtype\"");
    }
    const char *ds = get_str(d, dt, NULL);
    if (ds == NULL) {
        return d->st;
    }
    if (!dtype_of(ds, &elem)) {
        return bad(d, "unknown dtype \"%s\" (expected f32, bf16, i32, float32, ...)", ds);
    }
    pop(d, mk);
    mk = push_key(d, "shape");
    if (shape == NULL || !cm_json_is_array(shape)) {
        if (shape == NULL) {
            pop(d, mk);
        }
        return bad(d, shape == NULL ? "missing member \"shape\""
                                    : "expected an array of dimension sizes");
    }
    size_t rank = cm_json_size(shape);
    if (rank > d->lim->max_rank) {
        return bad(d, "rank %zu exceeds the limit of %u", rank, d->lim->max_rank);
    }
    int64_t dims[SP_MAX_RANK + 1];
    int64_t elems = 1;
    for (size_t i = 0; i < rank; i++) {
        const cm_json *x = cm_json_at(shape, i);
        size_t mi = push_idx(d, i);
        if (cm_json_is_string(x) && strcmp(cm_json_str(x), "?") == 0) {
            dims[i] = SP_DIM_DYNAMIC;
        } else if (get_int(d, x, 0, d->lim->max_dim, &dims[i]) != CM_OK) {
            return d->st;
        } else if (!cm_mul_i64(elems, dims[i], &elems) || elems > d->lim->max_elems) {
            return bad(d, "the element count overflows the limit of %lld",
                       (long long)d->lim->max_elems);
        }
        pop(d, mi);
    }
    pop(d, mk);
    cm_status st = sp_module_tensor_type(d->m, elem, dims, (uint32_t)rank, out, NULL);
    return st == CM_OK ? CM_OK : oom(d);
}

/* ---- attributes -------------------------------------------------------------------- */

static cm_status parse_attr_text(dec *d, const char *s, size_t n, sp_attr **out)
{
    cm_error e;
    cm_error_clear(&e);
    cm_status st = sp_mlir_parse_attr(d->m, s, n, out, &e);
    if (st == CM_ENOMEM) {
        return oom(d);
    }
    if (st != CM_OK) {
        const char *col = strchr(e.path, ':');
        return bad(d, "expected an MLIR attribute (e.g. \"array<i64: 0, 1>\"): %s (col %s)", e.msg,
                   col != NULL ? col + 1 : "?");
    }
    return CM_OK;
}

static sp_attr *int_list_attr(dec *d, const cm_json *arr, bool dense)
{
    size_t n = cm_json_size(arr);
    if (n > UINT32_MAX / 2) {
        bad(d, "array too long");
        return NULL;
    }
    int64_t *v = arena(d, sizeof(int64_t) * n);
    sp_attr **items = dense ? NULL : arena(d, sizeof(sp_attr *) * (n + 1));
    if (v == NULL || (!dense && items == NULL)) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t mi = push_idx(d, i);
        if (get_int(d, cm_json_at(arr, i), INT64_MIN, INT64_MAX, &v[i]) != CM_OK) {
            return NULL;
        }
        if (!dense && (items[i] = int_attr(d, v[i], NULL)) == NULL) {
            return NULL;
        }
        pop(d, mi);
    }
    sp_attr *a = new_attr(d, dense ? SP_ATTR_DENSE_ARRAY : SP_ATTR_ARRAY);
    if (a == NULL) {
        return NULL;
    }
    if (dense) {
        a->u.darr.elem = "i64";
        a->u.darr.v = v;
        a->u.darr.n = (uint32_t)n;
    } else {
        a->u.arr.items = items;
        a->u.arr.n = (uint32_t)n;
    }
    return a;
}

/* {"lhs_batching_dimensions": [..], ...} -> #stablehlo.dot<...>; empty lists
 * are left out as the reader does for the pretty form. */
static cm_status dot_dims_attr(dec *d, const cm_json *o, sp_attr **out)
{
    static const char *const keys[] = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                       "lhs_contracting_dimensions",
                                       "rhs_contracting_dimensions", NULL};
    if (only_keys(d, o, keys) != CM_OK) {
        return d->st;
    }
    sp_attr *a = new_attr(d, SP_ATTR_PARAMS);
    sp_named_attr *items = arena(d, sizeof(sp_named_attr) * 4);
    if (a == NULL || items == NULL) {
        return d->st;
    }
    uint32_t k = 0;
    for (int i = 0; i < 4; i++) {
        const cm_json *v = cm_json_get(o, keys[i]);
        if (v == NULL) {
            continue;
        }
        size_t mk = push_key(d, keys[i]);
        if (!cm_json_is_array(v)) {
            return bad(d, "expected an array of dimension numbers");
        }
        if (cm_json_size(v) > 0) {
            items[k].name = keys[i];
            if ((items[k].value = int_list_attr(d, v, false)) == NULL) {
                return d->st;
            }
            k++;
        }
        pop(d, mk);
    }
    a->u.params.name = "stablehlo.dot";
    a->u.params.items = items;
    a->u.params.n = k;
    *out = a;
    return CM_OK;
}

/* An attribute value: an MLIR attribute string, an integer (`N : i64`), a
 * boolean, an array of integers (`array<i64: ...>`) or, for
 * dot_dimension_numbers, an object of dimension lists. */
static cm_status decode_attr(dec *d, const char *name, const cm_json *j, sp_attr **out)
{
    switch (cm_json_kind_of(j)) {
    case CM_JSON_STRING:
        return parse_attr_text(d, cm_json_str(j), cm_json_str_len(j), out);
    case CM_JSON_INT:
        *out = int_attr(d, (int64_t)cm_json_int(j), "i64");
        return d->st;
    case CM_JSON_TRUE:
    case CM_JSON_FALSE:
        if ((*out = new_attr(d, SP_ATTR_BOOL)) != NULL) {
            (*out)->u.b = cm_json_is_true(j);
        }
        return d->st;
    case CM_JSON_ARRAY:
        *out = int_list_attr(d, j, true);
        return d->st;
    case CM_JSON_OBJECT:
        if (name != NULL && strcmp(name, "dot_dimension_numbers") == 0) {
            return dot_dims_attr(d, j, out);
        }
        break;
    default:
        break;
    }
    return bad(d, "expected an MLIR attribute string, an integer, a boolean or an array of "
                  "integers, got %s",
               json_kind(j));
}

/* Pushes every member of "attributes" (an object) onto the attribute stack. */
static cm_status decode_attr_dict(dec *d, const cm_json *o)
{
    if (o == NULL) {
        return CM_OK;
    }
    size_t mk = push_key(d, "attributes");
    if (!cm_json_is_object(o)) {
        return bad(d, "expected an object of attributes, got %s", json_kind(o));
    }
    const char *k;
    const cm_json *v;
    for (size_t m2 = 0; (k = cm_json_key_at(o, m2, NULL)) != NULL; m2++) {
        v = cm_json_val_at(o, m2);
        size_t mv = push_key(d, k);
        if (k[0] == '\0') {
            return bad(d, "attribute names must not be empty");
        }
        sp_attr *a = NULL;
        const char *name = astr(d, k, strlen(k));
        if (name == NULL || decode_attr(d, k, v, &a) != CM_OK || attr_push(d, name, a) != CM_OK) {
            return d->st;
        }
        pop(d, mv);
    }
    pop(d, mk);
    return CM_OK;
}

/* ---- meshes ------------------------------------------------------------------------- */

static const sp_mesh *find_mesh(dec *d, const char *name)
{
    return sp_module_mesh(d->m, name);
}

static cm_status decode_mesh(dec *d, const cm_json *j)
{
    if (!cm_json_is_object(j)) {
        return bad(d, "expected a mesh {\"name\": \"mesh\", \"axes\": [{\"name\": \"data\", "
                      "\"size\": 2}]}, got %s",
                   json_kind(j));
    }
    static const char *const keys[] = {"name", "axes", "device_ids", NULL};
    if (only_keys(d, j, keys) != CM_OK) {
        return d->st;
    }
    const cm_json *jn = cm_json_get(j, "name"), *jaxes = cm_json_get(j, "axes");
    const cm_json *jdev = cm_json_get(j, "device_ids");
    if (jn == NULL) {
        return bad(d, "missing member \"name\"");
    }
    size_t mk = push_key(d, "name");
    size_t nlen;
    const char *name = get_str(d, jn, &nlen);
    if (name == NULL) {
        return d->st;
    }
    if (!is_symbol_id(name, nlen)) {
        return bad(d,
                   "mesh name '%.100s' is not an MLIR identifier ([A-Za-z_][A-Za-z0-9_$.]*, "
                   "under 256 bytes): the plan would not read back",
                   name);
    }
    if (find_mesh(d, name) != NULL) {
        return bad(d, "mesh \"%s\" is defined twice", name);
    }
    pop(d, mk);
    sp_mesh *mesh = arena(d, sizeof *mesh);
    if (mesh == NULL) {
        return d->st;
    }
    if (jaxes != NULL) {
        mk = push_key(d, "axes");
        if (!cm_json_is_array(jaxes)) {
            return bad(d, "expected an array of axes");
        }
        size_t n = cm_json_size(jaxes);
        if (n > 64) {
            return bad(d, "a mesh has at most 64 axes");
        }
        mesh->axes = arena(d, sizeof(sp_mesh_axis) * (n + 1));
        if (mesh->axes == NULL) {
            return d->st;
        }
        for (size_t i = 0; i < n; i++) {
            const cm_json *ax = cm_json_at(jaxes, i), *an = NULL, *as = NULL;
            size_t mi = push_idx(d, i);
            if (cm_json_is_array(ax) && cm_json_size(ax) == 2) {
                an = cm_json_at(ax, 0);
                as = cm_json_at(ax, 1);
            } else if (cm_json_is_object(ax)) {
                static const char *const akeys[] = {"name", "size", NULL};
                if (only_keys(d, ax, akeys) != CM_OK) {
                    return d->st;
                }
                an = cm_json_get(ax, "name");
                as = cm_json_get(ax, "size");
            }
            if (an == NULL || as == NULL) {
                return bad(d, "expected an axis {\"name\": \"data\", \"size\": 2} or "
                              "[\"data\", 2]");
            }
            size_t al;
            const char *s = get_str(d, an, &al);
            if (s == NULL) {
                return d->st;
            }
            if (al == 0 || strchr(s, '"') != NULL || strchr(s, '\\') != NULL) {
                return bad(d, "axis names must be non-empty and contain no quotes");
            }
            mesh->axes[i].name = astr(d, s, al);
            if (get_int(d, as, 1, (int64_t)1 << 40, &mesh->axes[i].size) != CM_OK) {
                return d->st;
            }
            pop(d, mi);
        }
        mesh->n_axes = (uint32_t)n;
        pop(d, mk);
    }
    if (jdev != NULL) {
        mk = push_key(d, "device_ids");
        if (!cm_json_is_array(jdev)) {
            return bad(d, "expected an array of device ids");
        }
        size_t n = cm_json_size(jdev);
        if (n > (1u << 24)) {
            return bad(d, "too many device ids");
        }
        mesh->device_ids = arena(d, sizeof(int64_t) * (n + 1));
        if (mesh->device_ids == NULL) {
            return d->st;
        }
        for (size_t i = 0; i < n; i++) {
            size_t mi = push_idx(d, i);
            if (get_int(d, cm_json_at(jdev, i), 0, INT32_MAX, &mesh->device_ids[i]) !=
                CM_OK) {
                return d->st;
            }
            pop(d, mi);
        }
        mesh->n_device_ids = (uint32_t)n;
        pop(d, mk);
    }
    cm_error e;
    cm_error_clear(&e);
    if (sp_mesh_verify(mesh, &e) != CM_OK) {
        size_t ml = d->path_len;
        if (e.path[0] == '/') {
            snprintf(d->path + ml, sizeof d->path - ml, "%s", e.path);
        }
        bad(d, "%s", e.msg);
        pop(d, ml);
        return d->st;
    }
    uint32_t op;
    sp_attr *an = str_attr(d, name, nlen), *am = new_attr(d, SP_ATTR_MESH);
    if (d->st != CM_OK) {
        return d->st;
    }
    am->u.mesh = mesh;
    if (sp_module_new_op(d->m, d->m->body, "sdy.mesh", NULL, 0, NULL, 0, &op) != CM_OK) {
        return oom(d);
    }
    uint32_t mark = d->n_attrs;
    if (attr_push(d, "sym_name", an) != CM_OK || attr_push(d, "mesh", am) != CM_OK) {
        return d->st;
    }
    d->m->ops[op].attrs = pop_attrs(d, mark, &d->m->ops[op].n_attrs);
    return d->st;
}

/* ---- shardings ------------------------------------------------------------------------- */

static const sp_mesh *mesh_named(dec *d, const char *name)
{
    const sp_mesh *m = find_mesh(d, name);
    if (m == NULL) {
        bad(d, "unknown mesh \"%s\"", name);
    }
    return m;
}

static const char *pick_mesh(dec *d, const cm_json *jmesh)
{
    if (jmesh != NULL) {
        size_t mk = push_key(d, "mesh");
        const char *s = get_str(d, jmesh, NULL);
        if (s == NULL || mesh_named(d, s) == NULL) {
            return NULL;
        }
        pop(d, mk);
        return find_mesh(d, s) != NULL ? astr(d, s, strlen(s)) : NULL;
    }
    if (d->default_mesh == NULL) {
        bad(d, "a PartitionSpec or logical sharding needs a mesh: give \"mesh\" here or at the "
               "top level (the document has %s)",
            "no single mesh");
    }
    return d->default_mesh;
}

static bool axis_used(sp_axis_ref *const *used, const uint32_t *n_used, uint32_t rank,
                      const char *name)
{
    for (uint32_t i = 0; i < rank; i++) {
        for (uint32_t k = 0; k < n_used[i]; k++) {
            if (strcmp(used[i][k].name, name) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* A PartitionSpec entry: null, "axis", ["a", "b"], or "?" (unconstrained). */
static cm_status spec_dim(dec *d, const cm_json *e, sp_dim_sharding *ds)
{
    ds->is_closed = true;
    ds->priority = -1;
    if (cm_json_is_null(e)) {
        return CM_OK;
    }
    if (cm_json_is_string(e) && strcmp(cm_json_str(e), "?") == 0) {
        ds->is_closed = false;
        return CM_OK;
    }
    size_t n = cm_json_is_array(e) ? cm_json_size(e) : 1;
    if (!cm_json_is_array(e) && !cm_json_is_string(e)) {
        return bad(d, "expected null, a mesh axis name, a list of axis names or \"?\", got %s",
                   json_kind(e));
    }
    if (n > 64) {
        return bad(d, "too many axes");
    }
    ds->axes = arena(d, sizeof(sp_axis_ref) * (n + 1));
    if (ds->axes == NULL) {
        return d->st;
    }
    for (size_t i = 0; i < n; i++) {
        const cm_json *a = cm_json_is_array(e) ? cm_json_at(e, i) : e;
        size_t mi = cm_json_is_array(e) ? push_idx(d, i) : d->path_len;
        size_t al;
        const char *s = get_str(d, a, &al);
        if (s == NULL) {
            return d->st;
        }
        ds->axes[i].name = astr(d, s, al);
        pop(d, mi);
    }
    ds->n_axes = (uint32_t)n;
    return d->st;
}

/* flax.linen logical_to_mesh_axes: rules are scanned in order; a rule applies
 * to the dim named by its logical name when that dim is still unassigned and
 * none of its mesh axes is taken; unassigned dims replicate. */
static cm_status logical_dims(dec *d, const cm_json *names, sp_sharding *s)
{
    size_t rank = s->rank;
    bool *assigned = cm_calloc(rank + 1, sizeof(bool));
    sp_axis_ref **used = cm_calloc(rank + 1, sizeof(sp_axis_ref *));
    uint32_t *n_used = cm_calloc(rank + 1, sizeof(uint32_t));
    if (assigned == NULL || used == NULL || n_used == NULL) {
        oom(d);
        goto out;
    }
    for (size_t i = 0; i < rank; i++) {
        const cm_json *ni = cm_json_at(names, i);
        size_t mi = push_idx(d, i);
        if (!cm_json_is_null(ni) && !cm_json_is_string(ni)) {
            bad(d, "expected a logical axis name or null, got %s", json_kind(ni));
            goto out;
        }
        for (size_t k = 0; k < i && cm_json_is_string(ni); k++) {
            const cm_json *nk = cm_json_at(names, k);
            if (cm_json_is_string(nk) && strcmp(cm_json_str(nk), cm_json_str(ni)) == 0) {
                bad(d, "logical axis \"%s\" is used twice", cm_json_str(ni));
                goto out;
            }
        }
        pop(d, mi);
    }
    size_t nr = d->logical_rules != NULL ? cm_json_size(d->logical_rules) : 0;
    for (size_t r = 0; r < nr; r++) {
        const cm_json *rule = cm_json_at(d->logical_rules, r);
        const char *lname = cm_json_str(cm_json_at(rule, 0));
        const cm_json *maxes = cm_json_at(rule, 1);
        size_t pos = rank;
        for (size_t i = 0; i < rank; i++) {
            const cm_json *ni = cm_json_at(names, i);
            if (cm_json_is_string(ni) && strcmp(cm_json_str(ni), lname) == 0) {
                pos = i;
                break;
            }
        }
        if (pos == rank || assigned[pos]) {
            continue;
        }
        size_t na = cm_json_is_array(maxes)    ? cm_json_size(maxes)
                    : cm_json_is_string(maxes) ? 1
                                               : 0;
        bool free_ = true;
        for (size_t k = 0; k < na && free_; k++) {
            const cm_json *a = cm_json_is_array(maxes) ? cm_json_at(maxes, k) : maxes;
            free_ = !axis_used(used, n_used, (uint32_t)rank, cm_json_str(a));
        }
        if (!free_) {
            continue;
        }
        assigned[pos] = true;
        used[pos] = arena(d, sizeof(sp_axis_ref) * (na + 1));
        if (used[pos] == NULL) {
            goto out;
        }
        for (size_t k = 0; k < na; k++) {
            const cm_json *a = cm_json_is_array(maxes) ? cm_json_at(maxes, k) : maxes;
            used[pos][k].name = astr(d, cm_json_str(a), cm_json_str_len(a));
        }
        n_used[pos] = (uint32_t)na;
    }
    for (size_t i = 0; i < rank; i++) {
        s->dims[i].axes = used[i];
        s->dims[i].n_axes = n_used[i];
    }
out:
    cm_free(assigned);
    cm_free(used);
    cm_free(n_used);
    return d->st;
}

/* Verifies s on a copy (the reader leaves full-axis sizes unresolved). */
static cm_status verify_sharding(dec *d, const sp_sharding *s, const sp_type *t)
{
    const sp_mesh *mesh = s->mesh;
    if (s->mesh_name != NULL && (mesh = mesh_named(d, s->mesh_name)) == NULL) {
        return d->st;
    }
    uint32_t rank = t->kind == SP_TYPE_TENSOR ? t->rank : 0;
    if (t->kind != SP_TYPE_TENSOR) {
        return bad(d, "only tensors can be sharded");
    }
    sp_sharding *c = sp_sharding_clone(&d->m->arena, s);
    if (c == NULL) {
        return oom(d);
    }
    cm_error e;
    cm_error_clear(&e);
    if (sp_sharding_verify(c, mesh, rank, NULL, &e) != CM_OK) {
        return bad(d, "%s%s%s", e.msg, e.path[0] != '\0' ? " at " : "", e.path);
    }
    return CM_OK;
}

/* A sharding in any of the three spellings, for a value of type t:
 *   "<@mesh, [{\"a\"}, {}]>"               Shardy text (optionally #sdy.sharding<...>)
 *   ["data", null] / [["a", "b"], null]   a JAX PartitionSpec on the default mesh
 *   {"mesh": "m", "spec": [...]}          a PartitionSpec on a named mesh
 *   {"mesh": "m", "logical": ["batch", null]}  Flax logical axis names
 * logical (may be NULL) is a sibling "logical_axes" member. */
static cm_status decode_sharding(dec *d, const cm_json *j, const cm_json *logical, const sp_type *t,
                                 sp_sharding **out)
{
    *out = NULL;
    const cm_json *spec = NULL, *names = NULL, *jmesh = NULL;
    const char *mesh = NULL;
    size_t mk = d->path_len;
    if (j != NULL && logical != NULL) {
        return bad(d, "give either \"sharding\" or \"logical_axes\", not both");
    }
    if (j == NULL) {
        mk = push_key(d, "logical_axes");
        names = logical;
        mesh = pick_mesh(d, NULL);
    } else {
        mk = push_key(d, "sharding");
        if (cm_json_is_string(j)) {
            const char *s = cm_json_str(j);
            size_t n = cm_json_str_len(j), skip = 0;
            while (skip < n && (s[skip] == ' ' || s[skip] == '\n' || s[skip] == '\t')) {
                skip++;
            }
            if (n - skip >= 13 && memcmp(s + skip, "#sdy.sharding", 13) == 0) {
                skip += 13;
            }
            cm_error e;
            cm_error_clear(&e);
            size_t used = 0;
            sp_sharding *sh = NULL;
            cm_status st = sp_sharding_parse(s + skip, n - skip, &d->m->arena, &sh, &used, &e);
            if (st == CM_ENOMEM) {
                return oom(d);
            }
            if (st != CM_OK) {
                return bad(d, "expected a Shardy sharding like <@mesh, [{\"data\"}, {}]>: %s (%s)",
                           e.msg, e.path);
            }
            for (size_t i = skip + used; i < n; i++) {
                if (s[i] != ' ' && s[i] != '\n' && s[i] != '\t') {
                    return bad(d, "unexpected text after the sharding at offset %zu", i);
                }
            }
            if (verify_sharding(d, sh, t) != CM_OK) {
                return d->st;
            }
            pop(d, mk);
            *out = sh;
            return CM_OK;
        }
        if (cm_json_is_array(j)) {
            spec = j;
            mesh = pick_mesh(d, NULL);
        } else if (cm_json_is_object(j)) {
            static const char *const keys[] = {"mesh", "spec", "logical", NULL};
            if (only_keys(d, j, keys) != CM_OK) {
                return d->st;
            }
            jmesh = cm_json_get(j, "mesh");
            spec = cm_json_get(j, "spec");
            names = cm_json_get(j, "logical");
            if ((spec == NULL) == (names == NULL)) {
                return bad(d, "a sharding object needs exactly one of \"spec\" and \"logical\"");
            }
            if ((mesh = pick_mesh(d, jmesh)) == NULL) {
                return d->st;
            }
            push_key(d, spec != NULL ? "spec" : "logical");
        } else {
            return bad(d, "expected a sharding: Shardy text, a PartitionSpec list or an object, "
                          "got %s",
                       json_kind(j));
        }
    }
    const cm_json *list = spec != NULL ? spec : names;
    if (!cm_json_is_array(list)) {
        return bad(d, "expected an array, got %s", json_kind(list));
    }
    if (t->kind != SP_TYPE_TENSOR) {
        return bad(d, "only tensors can be sharded");
    }
    if (cm_json_size(list) > t->rank) {
        return bad(d, "%zu entries for a tensor of rank %u", cm_json_size(list), t->rank);
    }
    if (names != NULL && cm_json_size(list) != t->rank) {
        return bad(d, "%zu logical axis names for a tensor of rank %u", cm_json_size(list),
                   t->rank);
    }
    if (mesh == NULL) {
        return d->st;
    }
    sp_sharding *s = arena(d, sizeof *s);
    if (s == NULL) {
        return d->st;
    }
    s->mesh_name = mesh;
    s->rank = t->rank;
    s->dims = arena(d, sizeof(sp_dim_sharding) * (t->rank + 1u));
    if (s->dims == NULL) {
        return d->st;
    }
    for (uint32_t i = 0; i < t->rank; i++) {
        s->dims[i].is_closed = true;
        s->dims[i].priority = -1;
    }
    if (spec != NULL) {
        for (size_t i = 0; i < cm_json_size(spec); i++) {
            size_t mi = push_idx(d, i);
            if (spec_dim(d, cm_json_at(spec, i), &s->dims[i]) != CM_OK) {
                return d->st;
            }
            pop(d, mi);
        }
    } else if (logical_dims(d, names, s) != CM_OK) {
        return d->st;
    }
    if (verify_sharding(d, s, t) != CM_OK) {
        return d->st;
    }
    pop(d, mk);
    *out = s;
    return CM_OK;
}

/* ---- ops --------------------------------------------------------------------------------- */

static cm_status decode_ops(dec *d, const cm_json *ops, uint32_t blk);

static const char *const op_keys[] = {"op",          "operands",     "result",
                                      "results",     "type",         "sharding",
                                      "logical_axes", "attributes",  "regions",
                                      "call_target", "group_id",     "allowed_direction",
                                      "comment",     NULL};

/* The result list of an op: pushes types onto d->types, remembers names and
 * shardings. */
typedef struct res_info {
    const cm_json *name;     /* JSON string or NULL */
    const cm_json *sharding; /* or NULL */
    const cm_json *logical;  /* or NULL */
} res_info;

static cm_status decode_regions(dec *d, const cm_json *jr, u32v *blocks, uint32_t *sizes,
                                uint32_t *n_regions)
{
    size_t mk = push_key(d, "regions");
    if (!cm_json_is_array(jr)) {
        return bad(d, "expected an array of regions");
    }
    size_t n = cm_json_size(jr);
    if (n > 16) {
        return bad(d, "an op has at most 16 regions");
    }
    if (++d->depth > d->lim->max_depth) {
        return bad(d, "regions nested deeper than %u", d->lim->max_depth);
    }
    for (size_t i = 0; i < n; i++) {
        const cm_json *r = cm_json_at(jr, i);
        size_t mi = push_idx(d, i);
        if (!cm_json_is_object(r)) {
            return bad(d, "expected a region {\"args\": [...], \"ops\": [...]}");
        }
        static const char *const keys[] = {"args", "ops", NULL};
        if (only_keys(d, r, keys) != CM_OK) {
            return d->st;
        }
        uint32_t blk, scope = d->n_names;
        if (sp_module_new_block(d->m, SP_NONE, &blk) != CM_OK) {
            return oom(d);
        }
        const cm_json *args = cm_json_get(r, "args");
        if (args != NULL) {
            size_t ma = push_key(d, "args");
            if (!cm_json_is_array(args)) {
                return bad(d, "expected an array of block arguments");
            }
            for (size_t k = 0; k < cm_json_size(args); k++) {
                const cm_json *a = cm_json_at(args, k);
                size_t mak = push_idx(d, k);
                if (!cm_json_is_object(a) || cm_json_get(a, "type") == NULL) {
                    return bad(d, "expected a block argument {\"name\": \"%%a\", \"type\": "
                                  "\"tensor<f32>\"}");
                }
                static const char *const akeys[] = {"name", "type", NULL};
                if (only_keys(d, a, akeys) != CM_OK) {
                    return d->st;
                }
                uint32_t t, v;
                size_t mt = push_key(d, "type");
                if (decode_type(d, cm_json_get(a, "type"), &t) != CM_OK) {
                    return d->st;
                }
                pop(d, mt);
                if (count_value(d) != CM_OK) {
                    return d->st;
                }
                if (sp_module_add_block_arg(d->m, blk, t, &v) != CM_OK) {
                    return oom(d);
                }
                const cm_json *an = cm_json_get(a, "name");
                if (an != NULL) {
                    mt = push_key(d, "name");
                    if (define(d, an, v) != CM_OK) {
                        return d->st;
                    }
                    pop(d, mt);
                }
                pop(d, mak);
            }
            pop(d, ma);
        }
        const cm_json *ops = cm_json_get(r, "ops");
        if (ops != NULL) {
            size_t mo = push_key(d, "ops");
            if (decode_ops(d, ops, blk) != CM_OK) {
                return d->st;
            }
            pop(d, mo);
        }
        names_pop(d, scope);
        if (u32_push(d, blocks, blk) != CM_OK) {
            return d->st;
        }
        sizes[i] = 1;
        pop(d, mi);
    }
    *n_regions = (uint32_t)n;
    d->depth--;
    pop(d, mk);
    return CM_OK;
}

static cm_status decode_op(dec *d, const cm_json *j, uint32_t blk)
{
    if (!cm_json_is_object(j)) {
        return bad(d, "expected an op object {\"op\": \"stablehlo.add\", ...}, got %s",
                   json_kind(j));
    }
    if (only_keys(d, j, op_keys) != CM_OK) {
        return d->st;
    }
    if (++d->n_ops > d->lim->max_ops) {
        return bad(d, "too many ops (limit %u)", d->lim->max_ops);
    }
    /* name */
    const cm_json *jname = cm_json_get(j, "op");
    if (jname == NULL) {
        return bad(d, "missing member \"op\"");
    }
    size_t mk = push_key(d, "op");
    size_t nlen;
    const char *nm = get_str(d, jname, &nlen);
    if (nm == NULL) {
        return d->st;
    }
    sp_op_kind kind = sp_op_kind_of(nm, nlen);
    const char *opname = NULL;
    if (kind == SP_OP_UNKNOWN && memchr(nm, '.', nlen) == NULL && nlen < 64) {
        char full[80];
        snprintf(full, sizeof full, "stablehlo.%s", nm);
        kind = sp_op_kind_of(full, strlen(full));
    }
    bool core = strncmp(nm, "stablehlo.", 10) == 0 || strncmp(nm, "sdy.", 4) == 0 ||
                strncmp(nm, "func.", 5) == 0;
    if (kind != SP_OP_UNKNOWN) {
        opname = sp_op_kind_name(kind);
    } else if (!core && memchr(nm, '.', nlen) != NULL && nlen > 2 && nm[0] != '.' &&
               nm[nlen - 1] != '.') {
        opname = astr(d, nm, nlen); /* another dialect's op: kept, no sharding rule */
    } else {
        return bad(d, "unknown op \"%s\" (expected a StableHLO or sdy op name such as "
                      "\"stablehlo.add\")",
                   nm);
    }
    if (kind == SP_OP_FUNC_FUNC || kind == SP_OP_SDY_MESH) {
        return bad(d, "\"%s\" cannot appear in ops; use \"functions\" and \"meshes\"", opname);
    }
    pop(d, mk);
    uint32_t ops0 = d->operands.n, types0 = d->types.n, attrs0 = d->n_attrs;
    /* operands */
    const cm_json *jops = cm_json_get(j, "operands");
    if (jops != NULL) {
        mk = push_key(d, "operands");
        if (!cm_json_is_array(jops)) {
            return bad(d, "expected an array of value names");
        }
        for (size_t i = 0; i < cm_json_size(jops); i++) {
            size_t mi = push_idx(d, i);
            uint32_t v;
            if (use(d, cm_json_at(jops, i), &v) != CM_OK || u32_push(d, &d->operands, v)) {
                return d->st;
            }
            pop(d, mi);
        }
        pop(d, mk);
    }
    uint32_t n_opnds = d->operands.n - ops0;
    /* results */
    const cm_json *jres = cm_json_get(j, "results"), *jone = cm_json_get(j, "result");
    const cm_json *jtype = cm_json_get(j, "type"), *jsh = cm_json_get(j, "sharding");
    const cm_json *jlog = cm_json_get(j, "logical_axes");
    res_info one = {jone, NULL, NULL};
    res_info *ri = &one;
    size_t n_res = 0;
    bool constraint = sp_op_has_sharding_attr(kind); /* "sharding" is the op's, not a result's */
    if (jres != NULL && (jone != NULL || jtype != NULL)) {
        return bad(d, "give either \"results\" or \"result\"/\"type\", not both");
    }
    if (jres != NULL) {
        mk = push_key(d, "results");
        if (!cm_json_is_array(jres)) {
            return bad(d, "expected an array of results");
        }
        n_res = cm_json_size(jres);
        if (n_res > 4096) {
            return bad(d, "an op has at most 4096 results");
        }
        ri = cm_calloc(n_res + 1, sizeof *ri);
        if (ri == NULL) {
            return oom(d);
        }
        for (size_t i = 0; i < n_res && d->st == CM_OK; i++) {
            const cm_json *r = cm_json_at(jres, i);
            size_t mi = push_idx(d, i);
            static const char *const rkeys[] = {"name", "type", "sharding", "logical_axes",
                                                NULL};
            uint32_t t;
            if (!cm_json_is_object(r) || cm_json_get(r, "type") == NULL) {
                bad(d, "expected a result {\"name\": \"%%0\", \"type\": \"tensor<8xf32>\"}");
            } else if (only_keys(d, r, rkeys) == CM_OK) {
                size_t mt = push_key(d, "type");
                if (decode_type(d, cm_json_get(r, "type"), &t) == CM_OK &&
                    u32_push(d, &d->types, t) == CM_OK) {
                    pop(d, mt);
                    ri[i].name = cm_json_get(r, "name");
                    ri[i].sharding = cm_json_get(r, "sharding");
                    ri[i].logical = cm_json_get(r, "logical_axes");
                }
            }
            if (d->st == CM_OK) {
                pop(d, mi);
            }
        }
        if (d->st != CM_OK) {
            cm_free(ri);
            return d->st;
        }
        pop(d, mk);
    } else if (jone != NULL || jtype != NULL) {
        uint32_t t;
        if (jtype != NULL) {
            mk = push_key(d, "type");
            if (decode_type(d, jtype, &t) != CM_OK) {
                return d->st;
            }
            pop(d, mk);
        } else if ((constraint || kind == SP_OP_SDY_PROPAGATION_BARRIER) && n_opnds == 1) {
            t = d->m->values[d->operands.v[ops0]].type;
        } else {
            return bad(d, "missing member \"type\" (the result type)");
        }
        if (u32_push(d, &d->types, t) != CM_OK) {
            return d->st;
        }
        n_res = 1;
        if (!constraint) {
            one.sharding = jsh;
            one.logical = jlog;
        }
    }
    cm_status st = CM_OK;
    /* attributes: special members first, then the attribute object */
    const cm_json *jct = cm_json_get(j, "call_target");
    if (jct != NULL) {
        mk = push_key(d, "call_target");
        size_t n;
        const char *s = get_str(d, jct, &n);
        if (s != NULL && kind != SP_OP_CUSTOM_CALL) {
            bad(d, "\"call_target\" is only for stablehlo.custom_call");
        }
        if (s != NULL && attr_push(d, "call_target_name", str_attr(d, s, n)) == CM_OK) {
            pop(d, mk);
        }
    }
    if (d->st == CM_OK && constraint) {
        if (jsh == NULL && jlog == NULL) {
            bad(d, "missing member \"sharding\" (or \"logical_axes\") of the %s", opname);
        } else if (n_opnds != 1) {
            bad(d, "%s takes exactly one operand", opname);
        } else {
            sp_sharding *s;
            const sp_type *t = &d->m->types[d->m->values[d->operands.v[ops0]].type];
            sp_attr *a = new_attr(d, SP_ATTR_SHARDING);
            if (a != NULL && decode_sharding(d, jsh, jlog, t, &s) == CM_OK) {
                a->u.sharding = s;
                attr_push(d, "sharding", a);
            }
        }
    } else if (d->st == CM_OK && jres != NULL && (jsh != NULL || jlog != NULL)) {
        bad(d, "with \"results\", give each result its own \"sharding\"");
    }
    const cm_json *jgid = cm_json_get(j, "group_id");
    if (d->st == CM_OK && jgid != NULL) {
        mk = push_key(d, "group_id");
        int64_t gid;
        if (kind != SP_OP_SDY_SHARDING_GROUP) {
            bad(d, "\"group_id\" is only for sdy.sharding_group");
        } else if (get_int(d, jgid, 0, INT32_MAX, &gid) == CM_OK &&
                   attr_push(d, "group_id", int_attr(d, gid, "i64")) == CM_OK) {
            pop(d, mk);
        }
    }
    const cm_json *jdir = cm_json_get(j, "allowed_direction");
    if (d->st == CM_OK && jdir != NULL) {
        mk = push_key(d, "allowed_direction");
        const char *s = get_str(d, jdir, NULL);
        if (s != NULL && kind != SP_OP_SDY_PROPAGATION_BARRIER) {
            bad(d, "\"allowed_direction\" is only for sdy.propagation_barrier");
        } else if (s != NULL && strcmp(s, "NONE") != 0 && strcmp(s, "FORWARD") != 0 &&
                   strcmp(s, "BACKWARD") != 0 && strcmp(s, "BOTH") != 0) {
            bad(d, "expected NONE, FORWARD, BACKWARD or BOTH");
        } else if (s != NULL) {
            sp_attr *a = new_attr(d, SP_ATTR_ENUM);
            if (a != NULL) {
                a->u.enm.dialect = "sdy";
                a->u.enm.kind = "propagation_direction";
                a->u.enm.value = astr(d, s, strlen(s));
                if (attr_push(d, "allowed_direction", a) == CM_OK) {
                    pop(d, mk);
                }
            }
        }
    }
    if (d->st == CM_OK) {
        decode_attr_dict(d, cm_json_get(j, "attributes"));
    }
    /* result shardings (sdy.sharding = #sdy.sharding_per_value<[...]>) */
    if (d->st == CM_OK && !constraint) {
        bool any = false;
        const char *mesh = NULL;
        sp_sharding **sh = n_res > 0 ? arena(d, sizeof(sp_sharding *) * n_res) : NULL;
        for (size_t i = 0; i < n_res && d->st == CM_OK; i++) {
            if (ri[i].sharding == NULL && ri[i].logical == NULL) {
                continue;
            }
            const sp_type *t = &d->m->types[d->types.v[types0 + i]];
            size_t mi = jres != NULL ? push_key(d, "results") : d->path_len;
            if (jres != NULL) {
                push_idx(d, i);
            }
            if (sh != NULL && decode_sharding(d, ri[i].sharding, ri[i].logical, t, &sh[i]) ==
                                  CM_OK) {
                any = true;
                mesh = mesh != NULL ? mesh : sh[i]->mesh_name;
                pop(d, mi);
            }
        }
        for (size_t i = 0; i < n_res && any && d->st == CM_OK; i++) {
            if (sh[i] == NULL) {
                const sp_type *t = &d->m->types[d->types.v[types0 + i]];
                sh[i] = sp_sharding_open(&d->m->arena, mesh,
                                         t->kind == SP_TYPE_TENSOR ? t->rank : 0);
                if (sh[i] == NULL) {
                    oom(d);
                }
            }
        }
        if (any && d->st == CM_OK) {
            sp_attr *a = new_attr(d, SP_ATTR_SHARDING_LIST);
            if (a != NULL) {
                a->u.shardings.items = sh;
                a->u.shardings.n = (uint32_t)n_res;
                attr_push(d, "sdy.sharding", a);
            }
        }
    }
    /* regions (built before the op, as the MLIR reader does) */
    const cm_json *jreg = cm_json_get(j, "regions");
    uint32_t region_sizes[16], n_regions = 0;
    u32v blocks = {NULL, 0, 0};
    if (d->st == CM_OK && jreg != NULL) {
        decode_regions(d, jreg, &blocks, region_sizes, &n_regions);
    }
    uint32_t op = SP_NONE;
    if (d->st == CM_OK) {
        for (size_t i = 0; i < n_res && d->st == CM_OK; i++) {
            count_value(d);
        }
    }
    if (d->st == CM_OK &&
        sp_module_new_op(d->m, blk, opname, n_opnds > 0 ? d->operands.v + ops0 : NULL, n_opnds,
                         n_res > 0 ? d->types.v + types0 : NULL, (uint32_t)n_res, &op) != CM_OK) {
        oom(d);
    }
    if (d->st == CM_OK) {
        sp_op *o = &d->m->ops[op];
        o->attrs = pop_attrs(d, attrs0, &o->n_attrs);
        if (n_regions > 0 && sp_op_add_regions(d->m, op, n_regions) != CM_OK) {
            oom(d);
        }
        for (uint32_t i = 0; i < n_regions && d->st == CM_OK; i++) {
            if (sp_region_add_block(d->m, op, i, blocks.v[i]) != CM_OK) {
                oom(d);
            }
        }
    }
    cm_free(blocks.v);
    /* result names become visible after the op */
    for (size_t i = 0; i < n_res && d->st == CM_OK; i++) {
        if (ri[i].name == NULL) {
            continue;
        }
        if (jres != NULL) {
            mk = push_key(d, "results");
            push_idx(d, i);
            push_key(d, "name");
        } else {
            mk = push_key(d, "result");
        }
        if (define(d, ri[i].name, d->m->ops[op].first_result + (uint32_t)i) == CM_OK) {
            pop(d, mk);
        }
    }
    st = d->st;
    if (ri != &one) {
        cm_free(ri);
    }
    d->operands.n = ops0;
    d->types.n = types0;
    d->n_attrs = attrs0;
    return st;
}

static cm_status decode_ops(dec *d, const cm_json *ops, uint32_t blk)
{
    if (!cm_json_is_array(ops)) {
        return bad(d, "expected an array of ops, got %s", json_kind(ops));
    }
    size_t n = cm_json_size(ops);
    for (size_t i = 0; i < n; i++) {
        size_t mi = push_idx(d, i);
        if (decode_op(d, cm_json_at(ops, i), blk) != CM_OK) {
            return d->st;
        }
        pop(d, mi);
    }
    return CM_OK;
}

/* ---- functions -------------------------------------------------------------------------- */

static sp_attr *dict_attr(dec *d, uint32_t mark)
{
    sp_attr *a = new_attr(d, SP_ATTR_DICT);
    if (a != NULL) {
        a->u.dict.items = pop_attrs(d, mark, &a->u.dict.n);
    }
    return a;
}

/* One argument/result attribute dictionary: "attributes" plus the sharding. */
static sp_attr *io_dict(dec *d, const cm_json *o, const sp_type *t, bool *any)
{
    uint32_t mark = d->n_attrs;
    const cm_json *jsh = cm_json_get(o, "sharding"), *jlog = cm_json_get(o, "logical_axes");
    if (decode_attr_dict(d, cm_json_get(o, "attributes")) != CM_OK) {
        return NULL;
    }
    if (jsh != NULL || jlog != NULL) {
        sp_sharding *s;
        sp_attr *a = new_attr(d, SP_ATTR_SHARDING);
        if (a == NULL || decode_sharding(d, jsh, jlog, t, &s) != CM_OK) {
            return NULL;
        }
        a->u.sharding = s;
        if (attr_push(d, "sdy.sharding", a) != CM_OK) {
            return NULL;
        }
    }
    if (d->n_attrs > mark) {
        *any = true;
    }
    return dict_attr(d, mark);
}

static sp_attr *dict_list(dec *d, sp_attr **items, uint32_t n)
{
    sp_attr *a = new_attr(d, SP_ATTR_ARRAY);
    if (a != NULL) {
        a->u.arr.n = n;
        a->u.arr.items = cm_arena_memdup(&d->m->arena, items, n + 1u, sizeof(sp_attr *));
        if (a->u.arr.items == NULL) {
            oom(d);
        }
    }
    return a;
}

static cm_status decode_function(dec *d, const cm_json *fn, bool single)
{
    static const char *const keys[] = {"name", "visibility", "inputs", "ops", "outputs",
                                       "comment", NULL};
    if (!single && only_keys(d, fn, keys) != CM_OK) {
        return d->st;
    }
    const char *fname = "main";
    const cm_json *jn = single ? NULL : cm_json_get(fn, "name");
    size_t mk;
    if (jn != NULL) {
        mk = push_key(d, "name");
        if ((fname = get_str(d, jn, NULL)) == NULL) {
            return d->st;
        }
        if (fname[0] == '\0' || sp_module_func(d->m, fname) != SP_NONE) {
            return bad(d, fname[0] == '\0' ? "function names must not be empty"
                                           : "function \"%s\" is defined twice",
                       fname);
        }
        pop(d, mk);
    }
    const char *vis = single ? "public" : NULL;
    const cm_json *jv = single ? NULL : cm_json_get(fn, "visibility");
    if (jv != NULL) {
        mk = push_key(d, "visibility");
        if ((vis = get_str(d, jv, NULL)) == NULL) {
            return d->st;
        }
        if (strcmp(vis, "public") != 0 && strcmp(vis, "private") != 0 &&
            strcmp(vis, "nested") != 0) {
            return bad(d, "expected \"public\", \"private\" or \"nested\"");
        }
        pop(d, mk);
    }
    const cm_json *jin = cm_json_get(fn, "inputs"), *jops = cm_json_get(fn, "ops");
    const cm_json *jout = cm_json_get(fn, "outputs");
    uint32_t scope = d->n_names, blk;
    if (sp_module_new_block(d->m, SP_NONE, &blk) != CM_OK) {
        return oom(d);
    }
    size_t n_in = jin != NULL && cm_json_is_array(jin) ? cm_json_size(jin) : 0;
    size_t n_out = jout != NULL && cm_json_is_array(jout) ? cm_json_size(jout) : 0;
    if (n_in > (1u << 28) || n_out > (1u << 28)) {
        return bad(d, "too many inputs or outputs");
    }
    sp_attr **arg_dicts = cm_calloc(n_in + 1, sizeof(sp_attr *));
    sp_attr **res_dicts = cm_calloc(n_out + 1, sizeof(sp_attr *));
    uint32_t *res_vals = cm_calloc(n_out + 1, sizeof(uint32_t));
    cm_buf ft;
    cm_buf_init(&ft);
    bool any_arg = false, any_res = false;
    if (arg_dicts == NULL || res_dicts == NULL || res_vals == NULL) {
        oom(d);
        goto out;
    }
    /* inputs */
    if (jin != NULL) {
        mk = push_key(d, "inputs");
        if (!cm_json_is_array(jin)) {
            bad(d, "expected an array of inputs");
            goto out;
        }
        cm_buf_putc(&ft, '(');
        for (size_t i = 0; i < n_in; i++) {
            const cm_json *a = cm_json_at(jin, i);
            size_t mi = push_idx(d, i);
            static const char *const ikeys[] = {"name", "type", "sharding", "logical_axes",
                                                "attributes", NULL};
            if (!cm_json_is_object(a) || cm_json_get(a, "type") == NULL) {
                bad(d, "expected an input {\"name\": \"x\", \"type\": \"tensor<8x16xf32>\"}");
                goto out;
            }
            if (only_keys(d, a, ikeys) != CM_OK) {
                goto out;
            }
            uint32_t t, v;
            size_t mt = push_key(d, "type");
            if (decode_type(d, cm_json_get(a, "type"), &t) != CM_OK) {
                goto out;
            }
            pop(d, mt);
            if (count_value(d) != CM_OK) {
                goto out;
            }
            if (sp_module_add_block_arg(d->m, blk, t, &v) != CM_OK) {
                oom(d);
                goto out;
            }
            const cm_json *an = cm_json_get(a, "name");
            if (an != NULL) {
                mt = push_key(d, "name");
                if (define(d, an, v) != CM_OK) {
                    goto out;
                }
                pop(d, mt);
            }
            if (note_vlogical(d, v, cm_json_get(a, "logical_axes")) != CM_OK) {
                goto out;
            }
            if ((arg_dicts[i] = io_dict(d, a, &d->m->types[t], &any_arg)) == NULL) {
                goto out;
            }
            cm_buf_puts(&ft, i ? ", " : "");
            cm_buf_puts(&ft, d->m->types[t].text);
            pop(d, mi);
        }
        pop(d, mk);
    } else {
        cm_buf_putc(&ft, '(');
    }
    if (jops != NULL) {
        mk = push_key(d, "ops");
        if (decode_ops(d, jops, blk) != CM_OK) {
            goto out;
        }
        pop(d, mk);
    }
    cm_buf_puts(&ft, ") -> (");
    if (jout != NULL) {
        mk = push_key(d, "outputs");
        if (!cm_json_is_array(jout)) {
            bad(d, "expected an array of outputs");
            goto out;
        }
        for (size_t i = 0; i < n_out; i++) {
            const cm_json *o = cm_json_at(jout, i);
            size_t mi = push_idx(d, i);
            const cm_json *jval = o;
            static const char *const okeys[] = {"value", "sharding", "logical_axes", "attributes",
                                                NULL};
            if (cm_json_is_object(o)) {
                if (only_keys(d, o, okeys) != CM_OK) {
                    goto out;
                }
                jval = cm_json_get(o, "value");
                if (jval == NULL) {
                    bad(d, "missing member \"value\"");
                    goto out;
                }
                push_key(d, "value");
            } else if (!cm_json_is_string(o)) {
                bad(d, "expected an output: a value name or {\"value\": \"%%y\", \"sharding\": "
                       "...}");
                goto out;
            }
            if (use(d, jval, &res_vals[i]) != CM_OK) {
                goto out;
            }
            pop(d, mi);
            mi = push_idx(d, i);
            const sp_type *t = sp_value_type(d->m, res_vals[i]);
            if (cm_json_is_object(o)) {
                if ((res_dicts[i] = io_dict(d, o, t, &any_res)) == NULL) {
                    goto out;
                }
            } else if ((res_dicts[i] = new_attr(d, SP_ATTR_DICT)) == NULL) {
                goto out;
            }
            cm_buf_puts(&ft, i ? ", " : "");
            cm_buf_puts(&ft, t->text);
            pop(d, mi);
        }
        pop(d, mk);
    }
    cm_buf_putc(&ft, ')');
    /* the terminator, then the func.func op around the body */
    uint32_t ret, f;
    if (d->n_ops + 2 > d->lim->max_ops) {
        bad(d, "too many ops (limit %u)", d->lim->max_ops);
        goto out;
    }
    d->n_ops += 2;
    if (sp_module_new_op(d->m, blk, "func.return", res_vals, (uint32_t)n_out, NULL, 0, &ret) !=
            CM_OK ||
        sp_module_new_op(d->m, d->m->body, "func.func", NULL, 0, NULL, 0, &f) != CM_OK ||
        sp_op_add_regions(d->m, f, 1) != CM_OK || sp_region_add_block(d->m, f, 0, blk) != CM_OK ||
        ft.oom) {
        oom(d);
        goto out;
    }
    uint32_t mark = d->n_attrs;
    sp_attr *fty = new_attr(d, SP_ATTR_TYPE);
    if (fty == NULL) {
        goto out;
    }
    cm_error e;
    cm_error_clear(&e);
    if (sp_module_intern_type(d->m, ft.data, ft.len, &fty->u.type, &e) != CM_OK) {
        if (e.code == CM_ENOMEM) {
            oom(d);
        } else {
            bad(d, "function type: %s", e.msg);
        }
        goto out;
    }
    attr_push(d, "sym_name", str_attr(d, fname, strlen(fname)));
    attr_push(d, "function_type", fty);
    if (vis != NULL) {
        attr_push(d, "sym_visibility", str_attr(d, vis, strlen(vis)));
    }
    if (any_arg) {
        attr_push(d, "arg_attrs", dict_list(d, arg_dicts, (uint32_t)n_in));
    }
    if (any_res) {
        attr_push(d, "res_attrs", dict_list(d, res_dicts, (uint32_t)n_out));
    }
    if (d->st == CM_OK) {
        d->m->ops[f].attrs = pop_attrs(d, mark, &d->m->ops[f].n_attrs);
    }
out:
    names_pop(d, scope);
    cm_buf_fini(&ft);
    cm_free(arg_dicts);
    cm_free(res_dicts);
    cm_free(res_vals);
    return d->st;
}

/* ---- document-level members ------------------------------------------------------------- */

static cm_status name_list(dec *d, const cm_json *j, const char ***out, uint32_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (j == NULL) {
        return CM_OK;
    }
    if (!cm_json_is_array(j)) {
        return bad(d, "expected an array of factor names");
    }
    size_t n = cm_json_size(j);
    if (n > 1024) {
        return bad(d, "too many factor names");
    }
    const char **v = arena(d, sizeof(char *) * (n + 1));
    if (v == NULL) {
        return d->st;
    }
    for (size_t i = 0; i < n; i++) {
        size_t mi = push_idx(d, i);
        if ((v[i] = get_str(d, cm_json_at(j, i), NULL)) == NULL) {
            return d->st;
        }
        pop(d, mi);
    }
    *out = v;
    *n_out = (uint32_t)n;
    return CM_OK;
}

static cm_status rule_error(dec *d, const cm_error *e)
{
    if (e->code == CM_ENOMEM) {
        return oom(d);
    }
    return bad(d, "%s%s%s", e->msg, e->path[0] != '\0' ? " at " : "", e->path);
}

/* "custom_rules": {"target": "i j, j k -> i k" | {"sharding_rule": ..., ...} | {"sdy_rule": ...}} */
static cm_status decode_custom_rules(dec *d, const cm_json *j)
{
    if (!cm_json_is_object(j)) {
        return bad(d, "expected an object mapping call targets to rules");
    }
    const char *target;
    const cm_json *r;
    for (size_t m3 = 0; (target = cm_json_key_at(j, m3, NULL)) != NULL; m3++) {
        r = cm_json_val_at(j, m3);
        size_t mk = push_key(d, target);
        cm_error e;
        cm_error_clear(&e);
        if (cm_json_is_string(r)) {
            if (sp_custom_rules_put_einsum(d->g->rules, target, cm_json_str(r), NULL, &e) !=
                CM_OK) {
                return rule_error(d, &e);
            }
            pop(d, mk);
            continue;
        }
        if (!cm_json_is_object(r)) {
            return bad(d, "expected a rule: an einsum-like string \"i j, j k -> i k\" or an "
                          "object");
        }
        static const char *const keys[] = {"sharding_rule",         "reduction_factors",
                                           "need_replication_factors", "permutation_factors",
                                           "factor_sizes",          "sdy_rule",
                                           NULL};
        if (only_keys(d, r, keys) != CM_OK) {
            return d->st;
        }
        const cm_json *sdy = cm_json_get(r, "sdy_rule"), *spec = cm_json_get(r, "sharding_rule");
        if ((sdy == NULL) == (spec == NULL)) {
            return bad(d, "give exactly one of \"sharding_rule\" (JAX's einsum-like form) and "
                          "\"sdy_rule\" (Shardy text)");
        }
        if (sdy != NULL) {
            size_t ms = push_key(d, "sdy_rule");
            const char *s = get_str(d, sdy, NULL);
            if (s == NULL) {
                return d->st;
            }
            if (sp_custom_rules_put_text(d->g->rules, target, s, &e) != CM_OK) {
                return rule_error(d, &e);
            }
            pop(d, ms);
            pop(d, mk);
            continue;
        }
        sp_einsum_opts o;
        memset(&o, 0, sizeof o);
        size_t ms = push_key(d, "reduction_factors");
        if (name_list(d, cm_json_get(r, "reduction_factors"), &o.reduction, &o.n_reduction)) {
            return d->st;
        }
        pop(d, ms);
        ms = push_key(d, "need_replication_factors");
        if (name_list(d, cm_json_get(r, "need_replication_factors"), &o.need_replication,
                      &o.n_need_replication)) {
            return d->st;
        }
        pop(d, ms);
        ms = push_key(d, "permutation_factors");
        if (name_list(d, cm_json_get(r, "permutation_factors"), &o.permutation,
                      &o.n_permutation)) {
            return d->st;
        }
        pop(d, ms);
        const cm_json *fs = cm_json_get(r, "factor_sizes");
        if (fs != NULL) {
            ms = push_key(d, "factor_sizes");
            if (!cm_json_is_object(fs) || cm_json_size(fs) > 1024) {
                return bad(d, "expected an object of factor sizes {\"k\": 8}");
            }
            size_t n = cm_json_size(fs), i = 0;
            const char **names = arena(d, sizeof(char *) * (n + 1));
            int64_t *sizes = arena(d, sizeof(int64_t) * (n + 1));
            if (names == NULL || sizes == NULL) {
                return d->st;
            }
            const char *k;
            const cm_json *v;
            for (size_t m4 = 0; (k = cm_json_key_at(fs, m4, NULL)) != NULL; m4++) {
                v = cm_json_val_at(fs, m4);
                size_t mv = push_key(d, k);
                names[i] = k;
                if (get_int(d, v, 1, (int64_t)1 << 40, &sizes[i]) != CM_OK) {
                    return d->st;
                }
                i++;
                pop(d, mv);
            }
            o.size_names = names;
            o.sizes = sizes;
            o.n_sizes = (uint32_t)n;
            pop(d, ms);
        }
        ms = push_key(d, "sharding_rule");
        const char *s = get_str(d, spec, NULL);
        if (s == NULL) {
            return d->st;
        }
        if (sp_custom_rules_put_einsum(d->g->rules, target, s, &o, &e) != CM_OK) {
            return rule_error(d, &e);
        }
        pop(d, ms);
        pop(d, mk);
    }
    return CM_OK;
}

/* "logical_axis_rules": [["batch", "data"], ["hidden", ["model", "x"]], ["embed", null]] */
static cm_status check_logical_rules(dec *d, const cm_json *j)
{
    if (!cm_json_is_array(j)) {
        return bad(d, "expected an array of [logical_name, mesh_axes] pairs");
    }
    for (size_t i = 0; i < cm_json_size(j); i++) {
        const cm_json *r = cm_json_at(j, i);
        size_t mi = push_idx(d, i);
        if (!cm_json_is_array(r) || cm_json_size(r) != 2 ||
            !cm_json_is_string(cm_json_at(r, 0))) {
            return bad(d, "expected a rule [\"logical_name\", \"mesh_axis\" | [axes] | null]");
        }
        const cm_json *m = cm_json_at(r, 1);
        size_t mm = push_idx(d, 1);
        if (cm_json_is_array(m)) {
            for (size_t k = 0; k < cm_json_size(m); k++) {
                if (!cm_json_is_string(cm_json_at(m, k))) {
                    push_idx(d, k);
                    return bad(d, "expected a mesh axis name");
                }
            }
        } else if (!cm_json_is_string(m) && !cm_json_is_null(m)) {
            return bad(d, "expected a mesh axis name, a list of them, or null");
        }
        pop(d, mm);
        pop(d, mi);
    }
    return CM_OK;
}

static cm_status decode_doc(dec *d, const cm_json *root)
{
    if (!cm_json_is_object(root)) {
        return bad(d, "expected a graph object, got %s", json_kind(root));
    }
    static const char *const keys[] = {"format",    "name",       "attributes",
                                       "meshes",    "mesh",       "logical_axis_rules",
                                       "custom_rules", "functions", "inputs",
                                       "ops",       "outputs",    "comment",
                                       NULL};
    if (only_keys(d, root, keys) != CM_OK) {
        return d->st;
    }
    const cm_json *j;
    size_t mk;
    if ((j = cm_json_get(root, "format")) != NULL) {
        mk = push_key(d, "format");
        const char *s = get_str(d, j, NULL);
        if (s == NULL) {
            return d->st;
        }
        if (strcmp(s, "shardplan.graph/v1") != 0) {
            return bad(d, "unsupported format \"%s\" (expected \"shardplan.graph/v1\")", s);
        }
        pop(d, mk);
    }
    sp_module *m = d->m;
    m->had_module_op = true;
    if ((j = cm_json_get(root, "name")) != NULL) {
        mk = push_key(d, "name");
        size_t n;
        const char *s = get_str(d, j, &n);
        if (s == NULL) {
            return d->st;
        }
        if (!is_bare_id(s, n)) {
            return bad(d, "a module name must be an identifier ([A-Za-z_][A-Za-z0-9_$.-]*)");
        }
        m->sym_name = astr(d, s, n);
        pop(d, mk);
    }
    if ((j = cm_json_get(root, "attributes")) != NULL) {
        uint32_t mark = d->n_attrs;
        if (decode_attr_dict(d, j) != CM_OK) {
            return d->st;
        }
        m->attrs = pop_attrs(d, mark, &m->n_attrs);
    }
    const cm_json *meshes = cm_json_get(root, "meshes");
    if (meshes != NULL) {
        mk = push_key(d, "meshes");
        if (!cm_json_is_array(meshes)) {
            return bad(d, "expected an array of meshes");
        }
        if (cm_json_size(meshes) > 1024) {
            return bad(d, "at most 1024 meshes");
        }
        for (size_t i = 0; i < cm_json_size(meshes); i++) {
            size_t mi = push_idx(d, i);
            if (decode_mesh(d, cm_json_at(meshes, i)) != CM_OK) {
                return d->st;
            }
            pop(d, mi);
        }
        pop(d, mk);
        if (cm_json_size(meshes) == 1) {
            d->default_mesh = sp_module_str(
                m, cm_json_str(cm_json_get(cm_json_at(meshes, 0), "name")),
                strlen(cm_json_str(cm_json_get(cm_json_at(meshes, 0), "name"))));
        }
    }
    if ((j = cm_json_get(root, "mesh")) != NULL) {
        mk = push_key(d, "mesh");
        const char *s = get_str(d, j, NULL);
        if (s == NULL || mesh_named(d, s) == NULL) {
            return d->st;
        }
        d->default_mesh = astr(d, s, strlen(s));
        pop(d, mk);
    }
    if ((j = cm_json_get(root, "logical_axis_rules")) != NULL) {
        mk = push_key(d, "logical_axis_rules");
        if (check_logical_rules(d, j) != CM_OK) {
            return d->st;
        }
        d->logical_rules = j;
        pop(d, mk);
    }
    if ((j = cm_json_get(root, "custom_rules")) != NULL) {
        mk = push_key(d, "custom_rules");
        if (decode_custom_rules(d, j) != CM_OK) {
            return d->st;
        }
        pop(d, mk);
    }
    const cm_json *fns = cm_json_get(root, "functions");
    bool single = cm_json_get(root, "inputs") != NULL || cm_json_get(root, "ops") != NULL ||
                  cm_json_get(root, "outputs") != NULL;
    if (fns != NULL && single) {
        return bad(d, "give either \"functions\" or top-level \"inputs\"/\"ops\"/\"outputs\", "
                      "not both");
    }
    d->g->has_functions = fns != NULL;
    if (single) {
        return decode_function(d, root, true);
    }
    if (fns == NULL) {
        return bad(d, "missing member \"functions\" (or top-level \"inputs\", \"ops\", "
                      "\"outputs\")");
    }
    mk = push_key(d, "functions");
    if (!cm_json_is_array(fns)) {
        return bad(d, "expected an array of functions");
    }
    for (size_t i = 0; i < cm_json_size(fns); i++) {
        size_t mi = push_idx(d, i);
        const cm_json *f = cm_json_at(fns, i);
        if (!cm_json_is_object(f)) {
            return bad(d, "expected a function object");
        }
        if (decode_function(d, f, false) != CM_OK) {
            return d->st;
        }
        pop(d, mi);
    }
    pop(d, mk);
    return CM_OK;
}

/* ---- public API --------------------------------------------------------------------------- */

cm_status sp_graph_decode(const char *text, size_t len, const sp_graph_limits *lim_in,
                          sp_graph **out, cm_error *err)
{
    *out = NULL;
    sp_graph_limits lim;
    if (lim_in != NULL) {
        lim = *lim_in;
    } else {
        sp_graph_limits_init(&lim);
    }
    if (lim.max_rank > SP_MAX_RANK) {
        lim.max_rank = SP_MAX_RANK;
    }
    if (len > lim.max_bytes) {
        return cm_error_set(err, CM_EINVAL, "", "document of %zu bytes exceeds the limit of %zu",
                            len, lim.max_bytes);
    }
    cm_json_read_error je;
    cm_json_doc *doc = NULL;
    cm_status rst = cm_json_read(text, len, &doc, &je);
    if (rst == CM_ENOMEM) {
        return cm_error_oom(err);
    }
    if (rst != CM_OK) {
        return cm_error_set(err, CM_EINVAL, "", "invalid JSON at line %zu, column %zu: %s",
                            je.line, je.column, je.msg);
    }
    const cm_json *root = cm_json_doc_root(doc);
    if (!cm_json_is_object(root) && !cm_json_is_array(root)) {
        /* jansson, the reader before, took only an object or an array as a
         * document: a bare scalar stays a syntax error, reported where it
         * starts */
        size_t line = 1, col = 1;
        for (size_t i = 0;
             i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n');
             i++) {
            line += text[i] == '\n';
            col = text[i] == '\n' ? 1 : col + 1;
        }
        cm_json_doc_destroy(doc);
        return cm_error_set(err, CM_EINVAL, "",
                            "invalid JSON at line %zu, column %zu: expected '{' or '['", line,
                            col);
    }
    dec d;
    memset(&d, 0, sizeof d);
    d.lim = &lim;
    d.err = err;
    d.g = cm_calloc(1, sizeof *d.g);
    d.m = sp_module_create();
    if (d.g != NULL) {
        d.g->rules = sp_custom_rules_create();
        d.g->m = d.m;
    }
    if (d.g == NULL || d.m == NULL || d.g->rules == NULL) {
        oom(&d);
    } else {
        decode_doc(&d, root);
    }
    cm_json_doc_destroy(doc);
    cm_free(d.names);
    cm_free(d.heads);
    cm_free(d.operands.v);
    cm_free(d.types.v);
    cm_free(d.attrs);
    cm_free(d.tcache);
    if (d.st != CM_OK) {
        cm_free(d.vnames);
        cm_free(d.vlog);
        if (d.g != NULL) {
            sp_custom_rules_destroy(d.g->rules);
            cm_free(d.g);
        }
        sp_module_destroy(d.m);
        return d.st;
    }
    d.g->vnames = d.vnames;
    d.g->n_vnames = d.cap_vnames;
    d.g->vlog = d.vlog;
    d.g->n_vlog = d.n_vlog;
    *out = d.g;
    return CM_OK;
}

void sp_graph_destroy(sp_graph *g)
{
    if (g == NULL) {
        return;
    }
    sp_module_destroy(g->m);
    sp_custom_rules_destroy(g->rules);
    cm_free(g->vnames);
    cm_free(g->vlog);
    cm_free(g);
}

sp_module *sp_graph_module(const sp_graph *g)
{
    return g->m;
}

const sp_custom_rules *sp_graph_custom_rules(const sp_graph *g)
{
    return g->rules;
}

bool sp_graph_has_functions(const sp_graph *g)
{
    return g->has_functions;
}

const char *sp_graph_value_name(const sp_graph *g, uint32_t v)
{
    return v < g->n_vnames ? g->vnames[v] : NULL;
}

const char *const *sp_graph_value_names(const sp_graph *g, uint32_t *n_out)
{
    *n_out = g->n_vnames;
    return (const char *const *)g->vnames;
}

const char *sp_graph_value_logical_axes(const sp_graph *g, uint32_t v)
{
    uint32_t lo = 0, hi = g->n_vlog;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (g->vlog[mid].v < v) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < g->n_vlog && g->vlog[lo].v == v ? g->vlog[lo].json : NULL;
}

void sp_graph_logical_axes_py(const char *json, cm_buf *b)
{
    uint32_t n = 0;
    cm_buf_putc(b, '(');
    for (const char *c = json; *c != '\0'; c++) {
        if (*c == '"') {
            cm_buf_puts(b, n++ > 0 ? ", '" : "'");
            for (c++; *c != '\0' && *c != '"'; c++) {
                if (*c == '\\' && c[1] != '\0') {
                    c++;
                }
                cm_buf_putc(b, *c == '\n' || *c == '\r' ? ' ' : *c);
            }
            cm_buf_putc(b, '\'');
            if (*c == '\0') {
                break;
            }
        } else if (strncmp(c, "null", 4) == 0) {
            cm_buf_puts(b, n++ > 0 ? ", None" : "None");
            c += 3;
        }
    }
    cm_buf_puts(b, n == 1 ? ",)" : ")");
}
