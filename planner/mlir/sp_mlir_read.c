/* SPDX-License-Identifier: Apache-2.0
 * planner: the MLIR text reader. A scannerless recursive-descent parser for
 * the subset of MLIR that JAX emits with Shardy on and that Shardy's tests
 * use: modules, func.func, the generic op form, the custom forms of the
 * StableHLO, func and sdy ops (sp_mlir_int.h and the hand-written ones
 * below), regions, types, and attributes (sdy ones decoded, others kept).
 * Every error carries "LINE:COL" in err->path; nothing here aborts on input.
 * Temporary vectors live on reader-owned stacks so that nested ops reuse
 * them; everything kept lives in the module's arena. */
#include "sp_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_map.h"
#include "sp_mlir_int.h"
#include "sp_ops.h"
#include "sp_shard.h"
#include "sp_mlir.h"

#define MAX_DEPTH 256 /* nesting of regions and attributes */

/* ---- reader state ------------------------------------------------------------ */

typedef struct name_entry {
    const char *name; /* points into the input text */
    uint32_t len;
    uint32_t first;   /* first value id */
    uint32_t count;   /* number of values (a `%0:2` group has 2) */
    uint32_t prev;    /* entry shadowed by this one, or SP_NONE */
} name_entry;

typedef struct u32vec {
    uint32_t *v;
    uint32_t n, cap;
} u32vec;

typedef struct attrvec {
    sp_named_attr *v;
    uint32_t n, cap;
} attrvec;

typedef struct type_alias {
    const char *name; /* without '!', points into the input */
    uint32_t len;
    uint32_t type;
} type_alias;

typedef struct type_slot {
    const char *text; /* points into the input */
    uint32_t len;
    uint32_t type;
} type_slot;

typedef struct loc_alias {
    const char *name; /* without '#', arena string */
    sp_loc *loc;
} loc_alias;

typedef struct rd {
    const char *base; /* start of the text */
    const char *p;    /* cursor */
    const char *end;
    uint32_t line;        /* line of the cursor (with line_base) */
    const char *line_start;
    sp_module *m;
    cm_error *err;
    cm_status st;         /* first failure */
    sp_parse_notes *notes; /* MLIR's further errors with the first failure, or NULL */
    int depth;
    const char **func_arg_locs; /* the next function body's argument locs, or NULL */
    const sp_loc **func_arg_where; /* and their resolved locations, or NULL */
    /* locations: `#locN` references to resolve once the aliases (at the
     * end of the file) are read, and the location aliases */
    sp_loc **loc_refs;
    uint32_t n_loc_refs, cap_loc_refs;
    struct loc_alias *loc_aliases;
    uint32_t n_loc_aliases, cap_loc_aliases;
    /* SSA names */
    name_entry *names;
    uint32_t n_names, cap_names;
    uint32_t *slots; /* open addressing: entry index, SP_NONE empty, TOMB deleted */
    uint32_t n_slots;
    uint32_t *scopes; /* n_names at each scope start */
    uint32_t n_scopes, cap_scopes;
    /* stacks for ops under construction */
    u32vec ops;     /* operand value ids */
    u32vec types;   /* type ids */
    u32vec blocks;  /* region block ids */
    attrvec attrs;  /* named attributes */
    /* top-level `#name = value` and `!name = type` aliases */
    sp_alias *aliases;
    uint32_t n_aliases, cap_aliases;
    struct type_alias *type_aliases;
    uint32_t n_type_aliases, cap_type_aliases;
    /* type text as written -> type id, so that a spelling seen before is not
     * normalised and interned again (open addressing, key NULL = empty) */
    struct type_slot *tcache;
    uint32_t n_tcache, cap_tcache;
} rd;

#define TOMB (SP_NONE - 1)

/* ---- errors ------------------------------------------------------------------ */

static void pos_of(const rd *r, const char *at, uint32_t *line, uint32_t *col)
{
    /* at is at or before the cursor; walk back to its line start */
    uint32_t l = r->line;
    const char *ls = r->line_start;
    if (at < ls) {
        const char *q = ls;
        while (q > at) {
            q--;
            if (*q == '\n') {
                l--;
            }
        }
        ls = at;
        while (ls > r->base && ls[-1] != '\n') {
            ls--;
        }
    }
    *line = l;
    *col = (uint32_t)(at - ls) + 1;
}

__attribute__((format(printf, 3, 4))) static cm_status fail_at(rd *r, const char *at,
                                                               const char *fmt, ...)
{
    if (r->st != CM_OK) {
        return r->st;
    }
    uint32_t line, col;
    pos_of(r, at, &line, &col);
    char path[32];
    snprintf(path, sizeof path, "%u:%u", line, col);
    va_list ap;
    va_start(ap, fmt);
    cm_error_setv(r->err, CM_EINVAL, path, fmt, ap);
    va_end(ap);
    r->st = CM_EINVAL;
    return CM_EINVAL;
}

#define fail(r, ...) fail_at((r), (r)->p, __VA_ARGS__)

static cm_status oom(rd *r)
{
    if (r->st == CM_OK) {
        cm_error_oom(r->err);
        r->st = CM_ENOMEM;
    }
    return r->st;
}

/* ---- vectors --------------------------------------------------------------------- */

/* A copy of the n entries at items (elem bytes each) in an arena block of
 * twice *cap entries, *cap doubled: for arrays that start in a stack
 * buffer and outgrow it (the old block is left as it is). NULL when out of
 * memory. */
static void *arena_double(cm_arena *a, const void *items, uint32_t *cap, uint32_t n, size_t elem)
{
    size_t bytes;
    if (*cap > UINT32_MAX / 2 || !cm_mul_size((size_t)*cap * 2, elem, &bytes)) {
        return NULL;
    }
    void *p = cm_arena_alloc(a, bytes);
    if (p == NULL) {
        return NULL;
    }
    memcpy(p, items, (size_t)n * elem);
    *cap *= 2;
    return p;
}

static cm_status u32_push(rd *r, u32vec *s, uint32_t x)
{
    if (CM_GROW_U32(s->v, s->cap, s->n + 1, NULL) != CM_OK) {
        return oom(r);
    }
    s->v[s->n++] = x;
    return CM_OK;
}

static cm_status attr_push(rd *r, const char *name, sp_attr *a)
{
    if (CM_GROW_U32(r->attrs.v, r->attrs.cap, r->attrs.n + 1, NULL) != CM_OK) {
        return oom(r);
    }
    r->attrs.v[r->attrs.n].name = name;
    r->attrs.v[r->attrs.n].value = a;
    r->attrs.n++;
    return CM_OK;
}

static void *adup(rd *r, const void *p, uint32_t n, size_t elem)
{
    if (n == 0) {
        return NULL;
    }
    void *q = cm_arena_memdup(&r->m->arena, p, n, elem);
    if (q == NULL) {
        oom(r);
    }
    return q;
}

/* ---- lexing ------------------------------------------------------------------------ */

static void ws(rd *r)
{
    const char *p = r->p, *e = r->end;
    for (;;) {
        while (p < e && (*p == ' ' || *p == '\t' || *p == '\r')) {
            p++;
        }
        if (p < e && *p == '\n') {
            p++;
            r->line++;
            r->line_start = p;
            continue;
        }
        if (p + 1 < e && p[0] == '/' && p[1] == '/') {
            while (p < e && *p != '\n') {
                p++;
            }
            continue;
        }
        break;
    }
    r->p = p;
}

static int peek(rd *r)
{
    ws(r);
    return r->p < r->end ? (unsigned char)*r->p : -1;
}

static bool eat(rd *r, char c)
{
    if (peek(r) == (unsigned char)c) {
        r->p++;
        return true;
    }
    return false;
}

static bool eat_arrow(rd *r)
{
    ws(r);
    if (r->p + 1 < r->end && r->p[0] == '-' && r->p[1] == '>') {
        r->p += 2;
        return true;
    }
    return false;
}

static const char *char_name(char c, char *buf)
{
    buf[0] = '\'';
    buf[1] = c;
    buf[2] = '\'';
    buf[3] = '\0';
    return buf;
}

static cm_status expect(rd *r, char c)
{
    if (eat(r, c)) {
        return CM_OK;
    }
    char b[4];
    if (r->p >= r->end) {
        return fail(r, "expected %s, found end of input", char_name(c, b));
    }
    return fail(r, "expected %s, found '%c'", char_name(c, b), *r->p);
}

static bool is_id_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_id_char(char c)
{
    return is_id_start(c) || (c >= '0' && c <= '9') || c == '$' || c == '.';
}

/* A bare identifier [A-Za-z_][A-Za-z0-9_$.]*; returns its length (0: none). */
static uint32_t ident(rd *r, const char **s)
{
    ws(r);
    const char *p = r->p;
    if (p >= r->end || !is_id_start(*p)) {
        return 0;
    }
    while (p < r->end && is_id_char(*p)) {
        p++;
    }
    *s = r->p;
    uint32_t n = (uint32_t)(p - r->p);
    r->p = p;
    return n;
}

/* Consumes keyword kw when the next identifier is exactly kw. */
static bool kw(rd *r, const char *w)
{
    ws(r);
    size_t n = strlen(w);
    if ((size_t)(r->end - r->p) >= n && memcmp(r->p, w, n) == 0 &&
        (r->p + n == r->end || !is_id_char(r->p[n]))) {
        r->p += n;
        return true;
    }
    return false;
}

static cm_status expect_kw(rd *r, const char *w)
{
    if (kw(r, w)) {
        return CM_OK;
    }
    return fail(r, "expected '%s'", w);
}

static bool peek_kw(rd *r, const char *w)
{
    const char *save = r->p;
    uint32_t line = r->line;
    const char *ls = r->line_start;
    bool ok = kw(r, w);
    r->p = save;
    r->line = line;
    r->line_start = ls;
    return ok;
}

static cm_status integer(rd *r, int64_t *out)
{
    ws(r);
    const char *p = r->p;
    bool neg = false;
    if (p < r->end && (*p == '-' || *p == '+')) {
        neg = *p == '-';
        p++;
    }
    if (p >= r->end || *p < '0' || *p > '9') {
        return fail(r, "expected an integer");
    }
    uint64_t v = 0;
    if (p + 1 < r->end && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        const char *d0 = p;
        while (p < r->end) {
            char c = *p;
            unsigned dv;
            if (c >= '0' && c <= '9') {
                dv = (unsigned)(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                dv = (unsigned)(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                dv = (unsigned)(c - 'A' + 10);
            } else {
                break;
            }
            if (v > (UINT64_MAX >> 4)) {
                return fail(r, "integer literal out of range");
            }
            v = v * 16 + dv;
            p++;
        }
        if (p == d0) {
            return fail(r, "expected hex digits");
        }
    } else {
        while (p < r->end && *p >= '0' && *p <= '9') {
            unsigned dv = (unsigned)(*p - '0');
            if (v > (UINT64_MAX - dv) / 10) {
                return fail(r, "integer literal out of range");
            }
            v = v * 10 + dv;
            p++;
        }
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)UINT64_MAX) {
        return fail(r, "integer literal out of range");
    }
    r->p = p;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return CM_OK;
}

/* A string literal; decoded into the arena. */
static cm_status string_lit(rd *r, const char **s_out, size_t *len_out)
{
    if (peek(r) != '"') {
        return fail(r, "expected a string literal");
    }
    const char *start = r->p;
    const char *p = r->p + 1;
    size_t n = 0;
    while (p < r->end && *p != '"') {
        if (*p == '\n') {
            return fail_at(r, start, "unterminated string literal");
        }
        if (*p == '\\') {
            p++;
            if (p >= r->end) {
                break;
            }
            if (*p == '\\' || *p == '"' || *p == 'n' || *p == 't') {
                p++;
            } else if (p + 1 < r->end) {
                p += 2;
            } else {
                return fail_at(r, p, "bad escape in string literal");
            }
        } else {
            p++;
        }
        n++;
    }
    if (p >= r->end) {
        return fail_at(r, start, "unterminated string literal");
    }
    char *out = cm_arena_alloc(&r->m->arena, n + 1);
    if (out == NULL) {
        return oom(r);
    }
    size_t o = 0;
    for (const char *q = start + 1; q < p;) {
        if (*q == '\\') {
            q++;
            char c = *q;
            if (c == '\\' || c == '"') {
                out[o++] = c;
                q++;
            } else if (c == 'n') {
                out[o++] = '\n';
                q++;
            } else if (c == 't') {
                out[o++] = '\t';
                q++;
            } else {
                int v = 0;
                for (int k = 0; k < 2; k++) {
                    char h = q[k];
                    int d = (h >= '0' && h <= '9')   ? h - '0'
                            : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                            : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                     : -1;
                    if (d < 0) {
                        return fail_at(r, q - 1, "bad escape in string literal");
                    }
                    v = v * 16 + d;
                }
                out[o++] = (char)v;
                q += 2;
            }
        } else {
            out[o++] = *q++;
        }
    }
    out[o] = '\0';
    r->p = p + 1;
    *s_out = out;
    *len_out = o;
    return CM_OK;
}

/* Skips a balanced <...>, (...), [...] or {...} group starting at the
 * cursor (which must be on the opening char); strings and `->` are handled.
 * A closer that does not match its opener is an error at the closer. */
static cm_status skip_group(rd *r)
{
    const char *start = r->p;
    char want[MAX_DEPTH + 1]; /* expected closers */
    int depth = 0;
    const char *p = r->p;
    while (p < r->end) {
        char c = *p;
        if (c == '"') {
            p++;
            while (p < r->end && *p != '"') {
                if (*p == '\\') {
                    p++;
                }
                p++;
            }
            if (p >= r->end) {
                return fail_at(r, start, "unterminated string literal in '%c' group", *start);
            }
        } else if (c == '\n') {
            r->line++;
            r->line_start = p + 1;
        } else if (c == '-' && p + 1 < r->end && p[1] == '>') {
            p++;
        } else if (c == '<' || c == '(' || c == '[' || c == '{') {
            if (depth >= MAX_DEPTH) {
                return fail_at(r, p, "nesting too deep");
            }
            want[depth++] = c == '<' ? '>' : c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (c == '>' || c == ')' || c == ']' || c == '}') {
            if (c != want[depth - 1]) {
                return fail_at(r, p, "unbalanced brackets: expected '%c', found '%c'",
                               want[depth - 1], c);
            }
            if (--depth == 0) {
                r->p = p + 1;
                return CM_OK;
            }
        }
        p++;
    }
    return fail_at(r, start, "unbalanced '%c': no matching '%c' before the end of input", *start,
                   depth > 0 ? want[0] : *start);
}

/* ---- SSA names ------------------------------------------------------------------------ */

/* The hash the name table and the type cache index by (their low bits).
 * Both stay specialised tables rather than cm_maps: the name table's
 * scopes shadow and restore entries in place (tombstones, prev chains),
 * and the type cache as a cm_map cost the reader 1.4% more instructions
 * in bench_reader (an out-of-line probe and equality call per type
 * spelling read). */
static uint32_t name_hash(const char *s, uint32_t n)
{
    return (uint32_t)cm_hash_bytes(s, n);
}

static cm_status names_rehash(rd *r)
{
    uint32_t cap = r->n_slots == 0 ? 1024 : r->n_slots * 2;
    uint32_t *s = cm_alloc(sizeof(uint32_t) * cap);
    if (s == NULL) {
        return oom(r);
    }
    memset(s, 0xff, sizeof(uint32_t) * cap);
    /* re-insert only the visible (latest) entry of each name */
    for (uint32_t i = 0; i < r->n_slots; i++) {
        uint32_t e = r->slots[i];
        if (e == SP_NONE || e == TOMB) {
            continue;
        }
        uint32_t j = name_hash(r->names[e].name, r->names[e].len) & (cap - 1);
        while (s[j] != SP_NONE) {
            j = (j + 1) & (cap - 1);
        }
        s[j] = e;
    }
    cm_free(r->slots);
    r->slots = s;
    r->n_slots = cap;
    return CM_OK;
}

/* Slot of name: where it is, or the first free/tomb slot if absent. */
static uint32_t names_find(const rd *r, const char *s, uint32_t n, bool *found)
{
    uint32_t j = name_hash(s, n) & (r->n_slots - 1);
    uint32_t free_slot = SP_NONE;
    for (;;) {
        uint32_t e = r->slots[j];
        if (e == SP_NONE) {
            *found = false;
            return free_slot != SP_NONE ? free_slot : j;
        }
        if (e == TOMB) {
            if (free_slot == SP_NONE) {
                free_slot = j;
            }
        } else if (r->names[e].len == n && memcmp(r->names[e].name, s, n) == 0) {
            *found = true;
            return j;
        }
        j = (j + 1) & (r->n_slots - 1);
    }
}

static cm_status define_name(rd *r, const char *s, uint32_t n, uint32_t first, uint32_t count)
{
    if (r->n_slots == 0 || (r->n_names + 1) * 2 > r->n_slots) {
        if (names_rehash(r) != CM_OK) {
            return r->st;
        }
    }
    if (CM_GROW_U32(r->names, r->cap_names, r->n_names + 1, NULL) != CM_OK) {
        return oom(r);
    }
    bool found;
    uint32_t j = names_find(r, s, n, &found);
    uint32_t scope_start = r->n_scopes > 0 ? r->scopes[r->n_scopes - 1] : 0;
    if (found && r->slots[j] >= scope_start) {
        return fail_at(r, s, "redefinition of SSA value '%.*s'", (int)n, s);
    }
    name_entry *e = &r->names[r->n_names];
    e->name = s;
    e->len = n;
    e->first = first;
    e->count = count;
    e->prev = found ? r->slots[j] : SP_NONE;
    r->slots[j] = r->n_names++;
    return CM_OK;
}

static cm_status push_scope(rd *r)
{
    if (CM_GROW_U32(r->scopes, r->cap_scopes, r->n_scopes + 1, NULL) != CM_OK) {
        return oom(r);
    }
    r->scopes[r->n_scopes++] = r->n_names;
    return CM_OK;
}

static void pop_scope(rd *r)
{
    uint32_t start = r->scopes[--r->n_scopes];
    while (r->n_names > start) {
        name_entry *e = &r->names[--r->n_names];
        bool found;
        uint32_t j = names_find(r, e->name, e->len, &found);
        if (found) {
            r->slots[j] = e->prev == SP_NONE ? TOMB : e->prev;
        }
    }
}

/* `%name` (without #N). Returns the length including '%'. */
static uint32_t ssa_name(rd *r, const char **s)
{
    ws(r);
    const char *p = r->p;
    if (p >= r->end || *p != '%') {
        return 0;
    }
    p++;
    const char *q = p;
    if (q < r->end && *q >= '0' && *q <= '9') {
        while (q < r->end && *q >= '0' && *q <= '9') {
            q++;
        }
    } else {
        while (q < r->end && (is_id_char(*q) || *q == '-')) {
            q++;
        }
    }
    if (q == p) {
        return 0;
    }
    *s = r->p;
    uint32_t n = (uint32_t)(q - r->p);
    r->p = q;
    return n;
}

/* A value use `%x` or `%x#N`; resolves it to a value id. */
static cm_status value_use(rd *r, uint32_t *id_out)
{
    const char *s;
    uint32_t n = ssa_name(r, &s);
    if (n == 0) {
        return fail(r, "expected an SSA value (%%name)");
    }
    int64_t idx = 0;
    bool has_idx = false;
    if (r->p < r->end && *r->p == '#') {
        r->p++;
        if (integer(r, &idx) != CM_OK) {
            return r->st;
        }
        has_idx = true;
    }
    bool found = false;
    uint32_t j = r->n_slots > 0 ? names_find(r, s, n, &found) : 0;
    if (!found) {
        return fail_at(r, s, "use of undefined value '%.*s'", (int)n, s);
    }
    const name_entry *e = &r->names[r->slots[j]];
    if (idx < 0 || (uint64_t)idx >= e->count || (!has_idx && e->count != 1 && false)) {
        return fail_at(r, s, "result number %lld out of range for '%.*s' (%u results)",
                       (long long)idx, (int)n, s, e->count);
    }
    *id_out = e->first + (uint32_t)idx;
    return CM_OK;
}

/* ---- types --------------------------------------------------------------------------- */

/* Rewrites `#stablehlo.type_extensions<bounds = [3, ?]>` in a type to the
 * form StableHLO prints, `#stablehlo.bounds<3, ?>`. Returns false when the
 * text has no such encoding; else *out is a heap copy (NULL on OOM). */
static bool canonical_bounds(const char *s, size_t n, char **out, size_t *len_out)
{
    static const char key[] = "#stablehlo.type_extensions<";
    const size_t kn = sizeof key - 1;
    size_t at = 0;
    for (; at + kn <= n; at++) {
        if (s[at] == '#' && memcmp(s + at, key, kn) == 0) {
            break;
        }
    }
    if (at + kn > n) {
        return false;
    }
    size_t q = at + kn;
    while (q < n && s[q] == ' ') {
        q++;
    }
    if (n - q < 6 || memcmp(s + q, "bounds", 6) != 0) {
        return false;
    }
    q += 6;
    while (q < n && (s[q] == ' ' || s[q] == '=')) {
        q++;
    }
    if (q >= n || s[q] != '[') {
        return false;
    }
    size_t b0 = ++q;
    while (q < n && s[q] != ']') {
        q++;
    }
    if (q >= n) {
        return false;
    }
    size_t b1 = q++;
    while (q < n && s[q] == ' ') {
        q++;
    }
    if (q >= n || s[q] != '>') {
        return false;
    }
    q++;
    *out = cm_alloc(n + 32);
    if (*out == NULL) {
        return true;
    }
    size_t o = 0;
    memcpy(*out, s, at);
    o = at;
    memcpy(*out + o, "#stablehlo.bounds<", 18);
    o += 18;
    memcpy(*out + o, s + b0, b1 - b0);
    o += b1 - b0;
    (*out)[o++] = '>';
    memcpy(*out + o, s + q, n - q);
    o += n - q;
    *len_out = o;
    return true;
}

static cm_status tcache_put(rd *r, const char *text, uint32_t len, uint32_t h, uint32_t type);
static cm_status type_uncached(rd *r, int c, const char *start, size_t len, uint32_t *id_out);

/* Scans the extent of one type at the cursor and interns it. */
static cm_status type(rd *r, uint32_t *id_out)
{
    int c = peek(r);
    const char *start = r->p;
    if (c == '(') {
        /* function type */
        if (skip_group(r) != CM_OK) {
            return r->st;
        }
        if (!eat_arrow(r)) {
            return fail(r, "expected '->' in function type");
        }
        if (peek(r) == '(') {
            if (skip_group(r) != CM_OK) {
                return r->st;
            }
        } else {
            uint32_t tmp;
            if (type(r, &tmp) != CM_OK) {
                return r->st;
            }
        }
    } else if (c == '!') {
        r->p++;
        const char *s;
        if (ident(r, &s) == 0) {
            return fail(r, "expected a dialect type name after '!'");
        }
        if (r->p < r->end && *r->p == '<' && skip_group(r) != CM_OK) {
            return r->st;
        }
    } else {
        const char *s;
        uint32_t n = ident(r, &s);
        if (n == 0) {
            return fail(r, "expected a type");
        }
        if (r->p < r->end && *r->p == '<') {
            if (skip_group(r) != CM_OK) {
                return r->st;
            }
        }
    }
    size_t len = (size_t)(r->p - start);
    uint32_t h = name_hash(start, (uint32_t)len);
    if (r->cap_tcache > 0) {
        for (uint32_t j = h & (r->cap_tcache - 1);; j = (j + 1) & (r->cap_tcache - 1)) {
            const type_slot *ts = &r->tcache[j];
            if (ts->text == NULL) {
                break;
            }
            if (ts->len == len && memcmp(ts->text, start, len) == 0) {
                *id_out = ts->type;
                return CM_OK;
            }
        }
    }
    if (type_uncached(r, c, start, len, id_out) != CM_OK) {
        return r->st;
    }
    return tcache_put(r, start, (uint32_t)len, h, *id_out);
}

/* Adds a spelling to the type cache (a full cache only costs speed). */
static cm_status tcache_put(rd *r, const char *text, uint32_t len, uint32_t h, uint32_t type)
{
    if ((r->n_tcache + 1) * 2 > r->cap_tcache) {
        uint32_t cap = r->cap_tcache == 0 ? 256 : r->cap_tcache * 2;
        type_slot *t = cm_calloc(cap, sizeof(type_slot));
        if (t == NULL) {
            return oom(r);
        }
        for (uint32_t i = 0; i < r->cap_tcache; i++) {
            const type_slot *ts = &r->tcache[i];
            if (ts->text != NULL) {
                uint32_t j = name_hash(ts->text, ts->len) & (cap - 1);
                while (t[j].text != NULL) {
                    j = (j + 1) & (cap - 1);
                }
                t[j] = *ts;
            }
        }
        cm_free(r->tcache);
        r->tcache = t;
        r->cap_tcache = cap;
    }
    uint32_t j = h & (r->cap_tcache - 1);
    while (r->tcache[j].text != NULL) {
        j = (j + 1) & (r->cap_tcache - 1);
    }
    r->tcache[j] = (type_slot){text, len, type};
    r->n_tcache++;
    return CM_OK;
}

/* Interns the type spelled start[0..len) (c is its first char). */
static cm_status type_uncached(rd *r, int c, const char *start, size_t len, uint32_t *id_out)
{
    if (c == '!' && r->n_type_aliases > 0 && memchr(start, '<', len) == NULL) {
        for (uint32_t i = 0; i < r->n_type_aliases; i++) {
            const type_alias *ta = &r->type_aliases[i];
            if (ta->len == len - 1 && memcmp(ta->name, start + 1, len - 1) == 0) {
                *id_out = ta->type;
                return CM_OK;
            }
        }
    }
    cm_error e;
    cm_error_clear(&e);
    char *canon = NULL;
    const char *text = start;
    if (len > 27 && c != '(' && canonical_bounds(start, len, &canon, &len)) {
        if (canon == NULL) {
            return oom(r);
        }
        text = canon;
    }
    cm_status st = sp_module_intern_type(r->m, text, len, id_out, &e);
    cm_free(canon);
    if (st == CM_ENOMEM) {
        return oom(r);
    }
    if (st != CM_OK) {
        return fail_at(r, start, "%s", e.msg);
    }
    return CM_OK;
}

/* ---- attributes -------------------------------------------------------------------- */

static cm_status attr_value(rd *r, sp_attr **out);

static sp_attr *new_attr(rd *r, sp_attr_kind k)
{
    sp_attr *a = sp_attr_new(r->m, k);
    if (a == NULL) {
        oom(r);
    }
    return a;
}

static const char *astr(rd *r, const char *s, size_t n)
{
    const char *p = sp_module_str(r->m, s, n);
    if (p == NULL) {
        oom(r);
    }
    return p;
}

/* Optional `: type` after a number: the element type name (i64, f32...). */
static cm_status number_type(rd *r, const char **type_out)
{
    *type_out = NULL;
    ws(r);
    if (r->p < r->end && *r->p == ':' && !(r->p + 1 < r->end && r->p[1] == ':')) {
        const char *save = r->p;
        r->p++;
        const char *s;
        uint32_t n = ident(r, &s);
        if (n == 0) {
            r->p = save;
            return CM_OK;
        }
        if (r->p < r->end && *r->p == '<') {
            r->p = save; /* `: tensor<..>` is not a number type */
            return CM_OK;
        }
        *type_out = astr(r, s, n);
    }
    return r->st;
}

static bool looks_float(const char *p, const char *end)
{
    if (p < end && (*p == '-' || *p == '+')) {
        p++;
    }
    if (p + 1 < end && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        return false;
    }
    while (p < end && *p >= '0' && *p <= '9') {
        p++;
    }
    return p < end && (*p == '.' || *p == 'e' || *p == 'E');
}

static cm_status number_attr(rd *r, sp_attr **out)
{
    ws(r);
    if (looks_float(r->p, r->end)) {
        const char *start = r->p;
        char *endp;
        char buf[128];
        size_t n = 0;
        while (start + n < r->end && n < sizeof buf - 1 &&
               (strchr("0123456789+-.eE", start[n]) != NULL)) {
            n++;
        }
        memcpy(buf, start, n);
        buf[n] = '\0';
        double v = strtod(buf, &endp);
        if (endp == buf) {
            return fail(r, "malformed float literal");
        }
        r->p = start + (endp - buf);
        sp_attr *a = new_attr(r, SP_ATTR_FLOAT);
        if (a == NULL) {
            return r->st;
        }
        a->u.f.v = v;
        a->u.f.lit = astr(r, start, (size_t)(r->p - start));
        if (number_type(r, &a->u.f.type) != CM_OK) {
            return r->st;
        }
        *out = a;
        return CM_OK;
    }
    const char *start = r->p;
    sp_attr *a = new_attr(r, SP_ATTR_INT);
    if (a == NULL || integer(r, &a->u.i.v) != CM_OK) {
        return r->st;
    }
    const char *stop = r->p;
    if (number_type(r, &a->u.i.type) != CM_OK) {
        return r->st;
    }
    const char *t = a->u.i.type;
    if (t != NULL && (strcmp(t, "f32") == 0 || strcmp(t, "f64") == 0 || strcmp(t, "f16") == 0 ||
                      strcmp(t, "bf16") == 0 || (t[0] == 'f' && t[1] == '8'))) {
        /* `0x7FC00000 : f32`: a hex literal gives a float's bit pattern */
        int64_t bits = a->u.i.v;
        a->kind = SP_ATTR_FLOAT;
        a->u.f.type = t;
        a->u.f.lit = astr(r, start, (size_t)(stop - start));
        if (strcmp(t, "f64") == 0) {
            memcpy(&a->u.f.v, &bits, sizeof bits);
        } else if (strcmp(t, "f32") == 0) {
            uint32_t w = (uint32_t)bits;
            float f;
            memcpy(&f, &w, sizeof f);
            a->u.f.v = (double)f;
        } else {
            a->u.f.v = 0.0; /* the printer decodes the literal */
        }
    }
    *out = a;
    return r->st;
}

/* `{name = value, name, ...}` into the attr stack; returns count pushed. */
static cm_status attr_dict_entries(rd *r, uint32_t *count_out)
{
    uint32_t count = 0;
    if (expect(r, '{') != CM_OK) {
        return r->st;
    }
    if (!eat(r, '}')) {
        do {
            const char *s;
            size_t n;
            const char *name;
            if (peek(r) == '"') {
                if (string_lit(r, &name, &n) != CM_OK) {
                    return r->st;
                }
            } else {
                uint32_t k = ident(r, &s);
                if (k == 0) {
                    return fail(r, "expected an attribute name");
                }
                name = astr(r, s, k);
                if (name == NULL) {
                    return r->st;
                }
            }
            sp_attr *v;
            if (eat(r, '=')) {
                if (attr_value(r, &v) != CM_OK) {
                    return r->st;
                }
            } else {
                v = new_attr(r, SP_ATTR_UNIT);
                if (v == NULL) {
                    return r->st;
                }
            }
            if (attr_push(r, name, v) != CM_OK) {
                return r->st;
            }
            count++;
        } while (eat(r, ','));
        if (expect(r, '}') != CM_OK) {
            return r->st;
        }
    }
    *count_out = count;
    return CM_OK;
}

/* Pops the last n attrs from the stack into an arena array. */
static sp_named_attr *pop_attrs(rd *r, uint32_t n)
{
    r->attrs.n -= n;
    if (n == 0) {
        return NULL;
    }
    return adup(r, r->attrs.v + r->attrs.n, n, sizeof(sp_named_attr));
}

static cm_status dict_attr(rd *r, sp_attr **out)
{
    uint32_t n;
    if (attr_dict_entries(r, &n) != CM_OK) {
        return r->st;
    }
    sp_attr *a = new_attr(r, SP_ATTR_DICT);
    if (a == NULL) {
        return r->st;
    }
    a->u.dict.items = pop_attrs(r, n);
    a->u.dict.n = n;
    if (n > 0 && a->u.dict.items == NULL) {
        return r->st;
    }
    *out = a;
    return CM_OK;
}

static cm_status array_attr(rd *r, sp_attr **out)
{
    if (expect(r, '[') != CM_OK) {
        return r->st;
    }
    sp_attr *tmp[64];
    sp_attr **items = tmp;
    uint32_t n = 0, cap = 64;
    cm_status st = CM_OK;
    if (!eat(r, ']')) {
        do {
            if (n == cap) {
                sp_attr **p = arena_double(&r->m->arena, items, &cap, n, sizeof *items);
                if (p == NULL) {
                    return oom(r);
                }
                items = p;
            }
            st = attr_value(r, &items[n]);
            if (st != CM_OK) {
                return st;
            }
            n++;
        } while (eat(r, ','));
        if (expect(r, ']') != CM_OK) {
            return r->st;
        }
    }
    sp_attr *a = new_attr(r, SP_ATTR_ARRAY);
    if (a == NULL) {
        return r->st;
    }
    a->u.arr.n = n;
    a->u.arr.items = n > 0 ? adup(r, items, n, sizeof(sp_attr *)) : NULL;
    if (n > 0 && a->u.arr.items == NULL) {
        return r->st;
    }
    *out = a;
    return CM_OK;
}

/* array<i64: 1, 2> */
static cm_status dense_array_attr(rd *r, sp_attr **out)
{
    if (expect(r, '<') != CM_OK) {
        return r->st;
    }
    const char *s;
    uint32_t n = ident(r, &s);
    if (n == 0) {
        return fail(r, "expected an element type in array<>");
    }
    sp_attr *a = new_attr(r, SP_ATTR_DENSE_ARRAY);
    if (a == NULL) {
        return r->st;
    }
    a->u.darr.elem = astr(r, s, n);
    u32vec *stk = &r->types; /* reuse as scratch? no: collect into a local buffer */
    (void)stk;
    int64_t local[64];
    int64_t *v = local;
    uint32_t cnt = 0, cap = 64;
    if (eat(r, ':')) {
        do {
            if (cnt == cap) {
                int64_t *p = arena_double(&r->m->arena, v, &cap, cnt, sizeof *v);
                if (p == NULL) {
                    return oom(r);
                }
                v = p;
            }
            if (kw(r, "true")) {
                v[cnt] = 1;
            } else if (kw(r, "false")) {
                v[cnt] = 0;
            } else if (integer(r, &v[cnt]) != CM_OK) {
                return r->st;
            }
            cnt++;
        } while (eat(r, ','));
    }
    if (expect(r, '>') != CM_OK) {
        return r->st;
    }
    a->u.darr.n = cnt;
    a->u.darr.v = cnt > 0 ? adup(r, v, cnt, sizeof(int64_t)) : NULL;
    if (cnt > 0 && a->u.darr.v == NULL) {
        return r->st;
    }
    *out = a;
    return CM_OK;
}

/* Decodes the integers of a dense<...> body (nested lists of ints/bools). */
static bool dense_ints(rd *r, const char *s, const char *e, sp_attr *a, const sp_type *t)
{
    uint32_t cnt = 0, cap = 16;
    int64_t *v = cm_arena_alloc(&r->m->arena, sizeof(int64_t) * cap);
    if (v == NULL) {
        return false;
    }
    const char *p = s;
    while (p < e) {
        char c = *p;
        if (c == '[' || c == ']' || c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            p++;
            continue;
        }
        int64_t x;
        if (e - p >= 4 && memcmp(p, "true", 4) == 0) {
            x = 1;
            p += 4;
        } else if (e - p >= 5 && memcmp(p, "false", 5) == 0) {
            x = 0;
            p += 5;
        } else {
            bool neg = false;
            if (*p == '-') {
                neg = true;
                p++;
            }
            if (p >= e || *p < '0' || *p > '9') {
                return false;
            }
            uint64_t u = 0;
            while (p < e && *p >= '0' && *p <= '9') {
                if (u > (UINT64_MAX - 9) / 10) {
                    return false;
                }
                u = u * 10 + (uint64_t)(*p - '0');
                p++;
            }
            if (p < e && (*p == '.' || *p == 'e' || *p == 'E' || *p == 'x')) {
                return false;
            }
            if (u > (uint64_t)INT64_MAX) {
                return false;
            }
            x = neg ? -(int64_t)u : (int64_t)u;
        }
        if (cnt == cap) {
            if (cap > (1u << 24)) {
                return false;
            }
            int64_t *q = arena_double(&r->m->arena, v, &cap, cnt, sizeof *v);
            if (q == NULL) {
                return false;
            }
            v = q;
        }
        v[cnt++] = x;
    }
    /* expand a splat over a small tensor so consumers see every element */
    if (cnt == 1 && t->kind == SP_TYPE_TENSOR) {
        int64_t total = 1;
        for (uint32_t i = 0; i < t->rank; i++) {
            if (t->dims[i] < 0 || !cm_mul_i64(total, t->dims[i], &total) || total > 4096) {
                total = -1;
                break;
            }
        }
        if (total > 1) {
            int64_t *q = cm_arena_alloc(&r->m->arena, sizeof(int64_t) * (size_t)total);
            if (q == NULL) {
                return false;
            }
            for (int64_t i = 0; i < total; i++) {
                q[i] = v[0];
            }
            v = q;
            cnt = (uint32_t)total;
        }
    }
    a->u.dense.ints = v;
    a->u.dense.n_ints = cnt;
    return true;
}

/* dense<...> : type */
static cm_status dense_attr(rd *r, sp_attr **out)
{
    ws(r);
    if (r->p >= r->end || *r->p != '<') {
        return fail(r, "expected '<' after dense");
    }
    const char *s = r->p + 1;
    if (skip_group(r) != CM_OK) {
        return r->st;
    }
    const char *e = r->p - 1;
    sp_attr *a = new_attr(r, SP_ATTR_DENSE);
    if (a == NULL) {
        return r->st;
    }
    a->u.dense.body = astr(r, s, (size_t)(e - s));
    if (expect(r, ':') != CM_OK) {
        return r->st;
    }
    ws(r);
    const char *tat = r->p;
    if (type(r, &a->u.dense.type) != CM_OK) {
        return r->st;
    }
    /* MLIR's dense elements parser: a ranked tensor of static shape */
    const sp_type *dt = &r->m->types[a->u.dense.type];
    bool dynamic = dt->kind == SP_TYPE_TENSOR;
    for (uint32_t k = 0; dynamic && k < dt->rank; k++) {
        dynamic = dt->dims[k] >= 0;
    }
    dynamic = !dynamic && (dt->kind == SP_TYPE_TENSOR || strncmp(dt->text, "tensor<*", 8) == 0);
    if (dynamic) {
        return fail_at(r, tat, "elements literal type must have static shape");
    }
    if (!dense_ints(r, s, e, a, &r->m->types[a->u.dense.type])) {
        a->u.dense.ints = NULL;
        a->u.dense.n_ints = 0;
    }
    *out = a;
    return CM_OK;
}

/* The canonical parameter names of #stablehlo.conv in the order MLIR prints. */
static const char *const conv_names[9] = {
    "input_batch_dimension",         "input_feature_dimension",
    "input_spatial_dimensions",      "kernel_input_feature_dimension",
    "kernel_output_feature_dimension", "kernel_spatial_dimensions",
    "output_batch_dimension",        "output_feature_dimension",
    "output_spatial_dimensions"};

/* One `[b, 0, 1, f]` group of the compact conv dimension syntax. which: 0
 * input, 1 kernel, 2 output. Fills batch/feature (input: b, f; kernel: i,
 * o; output: b, f) and spatial dims by their index. */
static cm_status conv_group(rd *r, int which, int64_t *first, int64_t *second, int64_t *spatial,
                            uint32_t *n_spatial)
{
    char a = which == 1 ? 'i' : 'b', b = which == 1 ? 'o' : 'f';
    if (expect(r, '[') != CM_OK) {
        return r->st;
    }
    *first = -1;
    *second = -1;
    int64_t sp_pos[SP_MAX_RANK];
    uint32_t ns = 0;
    int64_t dim = 0;
    bool seen[SP_MAX_RANK] = {false};
    do {
        if (dim >= SP_MAX_RANK) {
            return fail(r, "too many dimensions in convolution dim_numbers");
        }
        ws(r);
        if (r->p < r->end && (*r->p == a || *r->p == b)) {
            if (*r->p == a) {
                *first = dim;
            } else {
                *second = dim;
            }
            r->p++;
        } else {
            int64_t k;
            if (integer(r, &k) != CM_OK) {
                return r->st;
            }
            if (k < 0 || k >= SP_MAX_RANK || seen[k]) {
                return fail(r, "bad spatial dimension index in convolution dim_numbers");
            }
            seen[k] = true;
            sp_pos[k] = dim;
            if ((uint32_t)k + 1 > ns) {
                ns = (uint32_t)k + 1;
            }
        }
        dim++;
    } while (eat(r, ','));
    if (expect(r, ']') != CM_OK) {
        return r->st;
    }
    for (uint32_t i = 0; i < ns; i++) {
        if (!seen[i]) {
            return fail(r, "missing spatial dimension %u in convolution dim_numbers", i);
        }
        spatial[i] = sp_pos[i];
    }
    if (*first < 0 || *second < 0) {
        return fail(r, "convolution dim_numbers need '%c' and '%c'", a, b);
    }
    *n_spatial = ns;
    return CM_OK;
}

static sp_attr *int_attr(rd *r, int64_t v, const char *type_name)
{
    sp_attr *a = new_attr(r, SP_ATTR_INT);
    if (a != NULL) {
        a->u.i.v = v;
        a->u.i.type = type_name;
    }
    return a;
}

static sp_attr *int_array_attr(rd *r, const int64_t *v, uint32_t n)
{
    sp_attr *a = new_attr(r, SP_ATTR_ARRAY);
    if (a == NULL) {
        return NULL;
    }
    a->u.arr.n = n;
    if (n > 0) {
        a->u.arr.items = cm_arena_alloc(&r->m->arena, sizeof(sp_attr *) * n);
        if (a->u.arr.items == NULL) {
            oom(r);
            return NULL;
        }
        for (uint32_t i = 0; i < n; i++) {
            a->u.arr.items[i] = int_attr(r, v[i], NULL);
            if (a->u.arr.items[i] == NULL) {
                return NULL;
            }
        }
    }
    return a;
}

/* `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` into PARAMS stablehlo.conv. */
static cm_status conv_dims(rd *r, sp_attr **out)
{
    int64_t f[3][2], spatial[3][SP_MAX_RANK];
    uint32_t ns[3];
    if (conv_group(r, 0, &f[0][0], &f[0][1], spatial[0], &ns[0]) != CM_OK || expect(r, 'x') != CM_OK ||
        conv_group(r, 1, &f[1][0], &f[1][1], spatial[1], &ns[1]) != CM_OK) {
        return r->st;
    }
    if (!eat_arrow(r)) {
        return fail(r, "expected '->' in convolution dim_numbers");
    }
    if (conv_group(r, 2, &f[2][0], &f[2][1], spatial[2], &ns[2]) != CM_OK) {
        return r->st;
    }
    sp_attr *a = new_attr(r, SP_ATTR_PARAMS);
    if (a == NULL) {
        return r->st;
    }
    a->u.params.name = "stablehlo.conv";
    a->u.params.n = 9;
    a->u.params.items = cm_arena_alloc(&r->m->arena, sizeof(sp_named_attr) * 9);
    if (a->u.params.items == NULL) {
        return oom(r);
    }
    for (int g = 0; g < 3; g++) {
        /* kernel order: input_feature (i), output_feature (o), spatial */
        a->u.params.items[g * 3 + 0].name = conv_names[g * 3 + 0];
        a->u.params.items[g * 3 + 0].value = int_attr(r, f[g][0], NULL);
        a->u.params.items[g * 3 + 1].name = conv_names[g * 3 + 1];
        a->u.params.items[g * 3 + 1].value = int_attr(r, f[g][1], NULL);
        a->u.params.items[g * 3 + 2].name = conv_names[g * 3 + 2];
        a->u.params.items[g * 3 + 2].value = int_array_attr(r, spatial[g], ns[g]);
    }
    if (r->st != CM_OK) {
        return r->st;
    }
    *out = a;
    return CM_OK;
}

/* `<k = v, ...>` parameters of a #dialect.name<...> attribute. */
static cm_status params_entries(rd *r, const char *name, sp_attr **out);

static cm_status params_body(rd *r, const char *name, sp_attr **out)
{
    if (expect(r, '<') != CM_OK) {
        return r->st;
    }
    return params_entries(r, name, out);
}

/* The `k = v, ...>` rest of params_body, after the '<'. */
static cm_status params_entries(rd *r, const char *name, sp_attr **out)
{
    uint32_t count = 0;
    if (!eat(r, '>')) {
        do {
            const char *s;
            uint32_t n = ident(r, &s);
            if (n == 0) {
                return fail(r, "expected a parameter name");
            }
            const char *pname = astr(r, s, n);
            sp_attr *v;
            if (expect(r, '=') != CM_OK) {
                return r->st;
            }
            ws(r);
            if (r->p < r->end && is_id_start(*r->p) && !peek_kw(r, "true") &&
                !peek_kw(r, "false") && !peek_kw(r, "dense") && !peek_kw(r, "array")) {
                /* a bare keyword value (an enum such as `tf32` or `DEFAULT`) */
                const char *w;
                uint32_t wn = ident(r, &w);
                v = new_attr(r, SP_ATTR_ENUM);
                if (v == NULL) {
                    return r->st;
                }
                v->u.enm.value = astr(r, w, wn);
            } else if (attr_value(r, &v) != CM_OK) {
                return r->st;
            }
            if (attr_push(r, pname, v) != CM_OK) {
                return r->st;
            }
            count++;
        } while (eat(r, ','));
        if (expect(r, '>') != CM_OK) {
            return r->st;
        }
    }
    sp_attr *a = new_attr(r, SP_ATTR_PARAMS);
    if (a == NULL) {
        return r->st;
    }
    a->u.params.name = name;
    a->u.params.n = count;
    a->u.params.items = pop_attrs(r, count);
    *out = a;
    return r->st;
}

/* Copies the codec's notes (positions relative to start, whose line and
 * line start are line and ls) into the reader's notes as LINE:COL. */
static void codec_notes(rd *r, const char *start, size_t len, uint32_t line, const char *ls,
                        const sp_parse_notes *n)
{
    for (uint32_t k = 0; k < n->n; k++) {
        size_t off = n->items[k].col >= 1 ? n->items[k].col - 1u : 0;
        if (off > len) {
            off = len;
        }
        uint32_t l = line;
        const char *lstart = ls;
        for (const char *q = start; q < start + off; q++) {
            if (*q == '\n') {
                l++;
                lstart = q + 1;
            }
        }
        sp_parse_notes_add(r->notes, l, (uint32_t)(start + off - lstart) + 1u, "%s",
                           n->items[k].msg);
    }
}

/* Runs an sdy codec on the text at the cursor. */
static cm_status sdy_codec(rd *r, int which, void **out)
{
    ws(r);
    const char *start = r->p;
    size_t used = 0;
    cm_error e;
    cm_error_clear(&e);
    cm_status st;
    size_t len = (size_t)(r->end - r->p);
    sp_parse_notes notes;
    notes.n = 0;
    notes.quiet = false;
    if (which == 0) {
        st = sp_sharding_parse_ex(start, len, &r->m->arena, (sp_sharding **)out, &used, &notes,
                                  &e);
    } else if (which == 1) {
        st = sp_mesh_parse_ex(start, len, &r->m->arena, (sp_mesh **)out, &used, &notes, &e);
    } else {
        st = sp_rule_parse_ex(start, len, &r->m->arena, (sp_rule **)out, &used, &notes, &e);
    }
    if (st == CM_ENOMEM) {
        return oom(r);
    }
    if (st != CM_OK) {
        if (r->st == CM_OK) {
            codec_notes(r, start, len, r->line, r->line_start, &notes);
            if (r->notes != NULL && notes.quiet) {
                r->notes->quiet = true;
            }
        }
        /* e.path is "col N" relative to start */
        long col = 0;
        if (sscanf(e.path, "col %ld", &col) == 1 && col >= 1 && (size_t)col <= len + 1) {
            const char *at = start + col - 1;
            /* keep line accounting right for a multi-line attribute */
            for (const char *q = start; q < at; q++) {
                if (*q == '\n') {
                    r->line++;
                    r->line_start = q + 1;
                }
            }
            r->p = at;
            return fail_at(r, at, "%s", e.msg);
        }
        return fail_at(r, start, "%s", e.msg);
    }
    for (const char *q = start; q < start + used; q++) {
        if (*q == '\n') {
            r->line++;
            r->line_start = q + 1;
        }
    }
    r->p = start + used;
    return CM_OK;
}

/* `[<@m, [...]>, ...]`: the stripped form of a sharding-per-value list
 * (manual_computation, named_computation); the cursor is on '['. */
static cm_status sharding_items(rd *r, bool per_value, sp_attr **out)
{
    if (expect(r, '[') != CM_OK) {
        return r->st;
    }
    sp_sharding *tmp[64];
    sp_sharding **items = tmp;
    uint32_t n = 0, cap = 64;
    if (!eat(r, ']')) {
        do {
            if (n == cap) {
                sp_sharding **p = arena_double(&r->m->arena, items, &cap, n, sizeof *items);
                if (p == NULL) {
                    return oom(r);
                }
                items = p;
            }
            /* each item may be written in full: `#sdy.sharding<@mesh, [...]>` */
            if (peek(r) == '#' && !kw(r, "#sdy.sharding")) {
                return fail(r, "expected a sharding `<@mesh, [...]>` or `#sdy.sharding<...>`");
            }
            if (sdy_codec(r, 0, (void **)&items[n]) != CM_OK) {
                if (per_value && r->st == CM_EINVAL && r->notes != NULL && !r->notes->quiet) {
                    uint32_t line, col;
                    pos_of(r, r->p, &line, &col);
                    sp_parse_notes_add(r->notes, line, col,
                                       "failed to parse Sdy_TensorShardingPerValue parameter "
                                       "'shardings' which is to be a "
                                       "`::llvm::ArrayRef<TensorShardingAttr>`");
                }
                return r->st;
            }
            n++;
        } while (eat(r, ','));
        if (expect(r, ']') != CM_OK) {
            return r->st;
        }
    }
    sp_attr *a = new_attr(r, SP_ATTR_SHARDING_LIST);
    if (a == NULL) {
        return r->st;
    }
    a->u.shardings.n = n;
    a->u.shardings.items = n > 0 ? adup(r, items, n, sizeof(sp_sharding *)) : NULL;
    *out = a;
    return r->st;
}

/* `<[<@m, [...]>, <@m, [...]>]>` after #sdy.sharding_per_value. */
static cm_status sharding_list(rd *r, sp_attr **out)
{
    if (expect(r, '<') != CM_OK || sharding_items(r, true, out) != CM_OK) {
        return r->st;
    }
    return expect(r, '>');
}

/* One axis ref `"x"` or `"x":(pre)size`. */
static cm_status axis_ref(rd *r, sp_axis_ref *out)
{
    size_t n;
    out->pre_size = 0;
    out->size = 0;
    if (string_lit(r, &out->name, &n) != CM_OK) {
        return r->st;
    }
    if (r->p < r->end && *r->p == ':' && r->p + 1 < r->end && r->p[1] == '(') {
        r->p += 2;
        const char *at = r->p;
        if (integer(r, &out->pre_size) != CM_OK || expect(r, ')') != CM_OK ||
            integer(r, &out->size) != CM_OK) {
            return r->st;
        }
        if (out->pre_size < 1 || out->size < 1) {
            return fail_at(r, at, "sub-axis pre-size and size must be positive");
        }
    }
    return CM_OK;
}

/* `{"x", "y":(1)2}` into an arena list. */
static cm_status axis_list(rd *r, sp_axis_list *out)
{
    sp_axis_ref tmp[SP_MAX_RANK];
    uint32_t n = 0;
    if (expect(r, '{') != CM_OK) {
        return r->st;
    }
    if (!eat(r, '}')) {
        do {
            if (n >= SP_MAX_RANK) {
                return fail(r, "too many axes in a list (max %d)", SP_MAX_RANK);
            }
            if (axis_ref(r, &tmp[n]) != CM_OK) {
                return r->st;
            }
            n++;
        } while (eat(r, ','));
        if (expect(r, '}') != CM_OK) {
            return r->st;
        }
    }
    out->n = n;
    out->axes = n > 0 ? adup(r, tmp, n, sizeof(sp_axis_ref)) : NULL;
    return r->st;
}

static cm_status axis_list_attr(rd *r, sp_attr **out)
{
    sp_attr *a = new_attr(r, SP_ATTR_AXIS_LIST);
    if (a == NULL || axis_list(r, &a->u.axes) != CM_OK) {
        return r->st;
    }
    *out = a;
    return CM_OK;
}

/* `[{"x"}, {}]` (per dimension) or, when a2a, `[{"x"}: 0->1, ...]`. */
static cm_status axis_lists_attr(rd *r, bool a2a, sp_attr **out)
{
    sp_attr *a = new_attr(r, a2a ? SP_ATTR_ALL_TO_ALL : SP_ATTR_AXIS_LISTS);
    if (a == NULL || expect(r, '[') != CM_OK) {
        return r->st;
    }
    sp_all_to_all_param tmp[SP_MAX_RANK];
    uint32_t n = 0;
    if (!eat(r, ']')) {
        do {
            if (n >= SP_MAX_RANK) {
                return fail(r, "too many entries (max %d)", SP_MAX_RANK);
            }
            if (axis_list(r, &tmp[n].axes) != CM_OK) {
                return r->st;
            }
            if (a2a) {
                if (expect(r, ':') != CM_OK || integer(r, &tmp[n].src_dim) != CM_OK) {
                    return r->st;
                }
                if (!eat_arrow(r)) {
                    return fail(r, "expected '->' in an all-to-all parameter");
                }
                if (integer(r, &tmp[n].tgt_dim) != CM_OK) {
                    return r->st;
                }
            }
            n++;
        } while (eat(r, ','));
        if (expect(r, ']') != CM_OK) {
            return r->st;
        }
    }
    if (a2a) {
        a->u.a2a.n = n;
        a->u.a2a.items = n > 0 ? adup(r, tmp, n, sizeof(sp_all_to_all_param)) : NULL;
    } else {
        sp_axis_list lists[SP_MAX_RANK];
        for (uint32_t i = 0; i < n; i++) {
            lists[i] = tmp[i].axes;
        }
        a->u.axis_lists.n = n;
        a->u.axis_lists.items = n > 0 ? adup(r, lists, n, sizeof(sp_axis_list)) : NULL;
    }
    *out = a;
    return r->st;
}

/* `#...` attributes. */
static cm_status hash_attr(rd *r, sp_attr **out)
{
    const char *start = r->p;
    r->p++; /* '#' */
    const char *s;
    uint32_t n = ident(r, &s);
    if (n == 0) {
        return fail(r, "expected an attribute name after '#'");
    }
    if (n == 12 && memcmp(s, "sdy.sharding", 12) == 0) {
        sp_attr *a = new_attr(r, SP_ATTR_SHARDING);
        if (a == NULL || sdy_codec(r, 0, (void **)&a->u.sharding) != CM_OK) {
            return r->st;
        }
        *out = a;
        return CM_OK;
    }
    if (n == 22 && memcmp(s, "sdy.sharding_per_value", 22) == 0) {
        return sharding_list(r, out);
    }
    if (n == 8 && memcmp(s, "sdy.mesh", 8) == 0) {
        sp_attr *a = new_attr(r, SP_ATTR_MESH);
        if (a == NULL || sdy_codec(r, 1, (void **)&a->u.mesh) != CM_OK) {
            return r->st;
        }
        *out = a;
        return CM_OK;
    }
    if (n == 20 && memcmp(s, "sdy.op_sharding_rule", 20) == 0) {
        sp_attr *a = new_attr(r, SP_ATTR_RULE);
        if (a == NULL || sdy_codec(r, 2, (void **)&a->u.rule) != CM_OK) {
            return r->st;
        }
        *out = a;
        return CM_OK;
    }
    if (memchr(s, '.', n) == NULL && r->p < r->end && *r->p == '<') {
        /* #dialect<kind VALUE> enums, and sdy's list attributes */
        const char *save = r->p;
        uint32_t save_line = r->line;
        const char *save_ls = r->line_start;
        r->p++;
        const char *k, *v;
        uint32_t kn = ident(r, &k);
        if (n == 3 && memcmp(s, "sdy", 3) == 0 && kn > 0) {
            cm_status st = CM_EINVAL;
            if ((kn == 13 && memcmp(k, "axis_ref_list", 13) == 0) ||
                (kn == 11 && memcmp(k, "manual_axes", 11) == 0)) {
                st = axis_list_attr(r, out);
                if (st == CM_OK) {
                    (*out)->u.axes.manual = kn == 11;
                }
            } else if (kn == 22 && memcmp(k, "list_of_axis_ref_lists", 22) == 0) {
                st = axis_lists_attr(r, false, out);
            } else if (kn == 21 && memcmp(k, "all_to_all_param_list", 21) == 0) {
                st = axis_lists_attr(r, true, out);
            }
            if (st != CM_EINVAL || r->st != CM_OK) {
                return st != CM_OK ? st : expect(r, '>');
            }
        }
        uint32_t vn = kn > 0 ? ident(r, &v) : 0;
        if (vn > 0 && eat(r, '>')) {
            sp_attr *a = new_attr(r, SP_ATTR_ENUM);
            if (a == NULL) {
                return r->st;
            }
            a->u.enm.dialect = n == 9 && memcmp(s, "stablehlo", 9) == 0 ? "stablehlo" : astr(r, s, n);
            a->u.enm.kind = astr(r, k, kn);
            a->u.enm.value = astr(r, v, vn);
            *out = a;
            return r->st;
        }
        r->p = save;
        r->line = save_line;
        r->line_start = save_ls;
    }
    if (r->n_aliases > 0 && (r->p >= r->end || *r->p != '<')) {
        for (uint32_t i = 0; i < r->n_aliases; i++) {
            const sp_alias *al = &r->aliases[i];
            if (strlen(al->name) == n && memcmp(al->name, s, n) == 0) {
                *out = al->value;
                return CM_OK;
            }
        }
    }
    if (n == 14 && memcmp(s, "stablehlo.conv", 14) == 0 && r->p < r->end && *r->p == '<') {
        r->p++;
        if (kw(r, "raw")) {
            return params_entries(r, "stablehlo.conv", out);
        }
        if (conv_dims(r, out) != CM_OK || expect(r, '>') != CM_OK) {
            return r->st;
        }
        return CM_OK;
    }
    if (n > 10 && memcmp(s, "stablehlo.", 10) == 0 && r->p < r->end && *r->p == '<') {
        /* parameters; fall back to verbatim if they do not parse */
        const char *save = r->p;
        uint32_t line = r->line;
        const char *ls = r->line_start;
        cm_error saved = r->err != NULL ? *r->err : (cm_error){0};
        uint32_t nattrs = r->attrs.n;
        const char *name = astr(r, s, n);
        if (params_body(r, name, out) == CM_OK) {
            return CM_OK;
        }
        if (r->st == CM_ENOMEM) {
            return r->st;
        }
        r->st = CM_OK;
        if (r->err != NULL) {
            *r->err = saved;
        }
        r->attrs.n = nattrs;
        r->p = save;
        r->line = line;
        r->line_start = ls;
    }
    if (r->p < r->end && *r->p == '<' && skip_group(r) != CM_OK) {
        return r->st;
    }
    sp_attr *a = new_attr(r, SP_ATTR_OPAQUE);
    if (a == NULL) {
        return r->st;
    }
    a->u.opaque.text = astr(r, start, (size_t)(r->p - start));
    *out = a;
    return r->st;
}

static cm_status attr_value(rd *r, sp_attr **out)
{
    if (++r->depth > MAX_DEPTH) {
        return fail(r, "attributes nested too deeply");
    }
    cm_status st = CM_OK;
    int c = peek(r);
    if (c == '"') {
        sp_attr *a = new_attr(r, SP_ATTR_STRING);
        if (a == NULL || string_lit(r, &a->u.str.s, &a->u.str.len) != CM_OK) {
            st = r->st;
        } else {
            *out = a;
        }
    } else if (c == '[') {
        st = array_attr(r, out);
    } else if (c == '{') {
        st = dict_attr(r, out);
    } else if (c == '#') {
        st = hash_attr(r, out);
    } else if (c == '@') {
        r->p++;
        const char *s;
        size_t n;
        sp_attr *a = new_attr(r, SP_ATTR_SYMBOL);
        if (a == NULL) {
            st = r->st;
        } else if (peek(r) == '"') {
            st = string_lit(r, &a->u.sym, &n);
        } else {
            uint32_t k = ident(r, &s);
            if (k == 0) {
                st = fail(r, "expected a symbol name after '@'");
            } else {
                a->u.sym = astr(r, s, k);
            }
        }
        if (st == CM_OK) {
            *out = a;
        }
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
        st = number_attr(r, out);
    } else if (kw(r, "true") || kw(r, "false")) {
        sp_attr *a = new_attr(r, SP_ATTR_BOOL);
        if (a == NULL) {
            st = r->st;
        } else {
            a->u.b = r->p[-1] == 'e' && r->p[-2] == 'u';
            *out = a;
        }
    } else if (kw(r, "unit")) {
        *out = new_attr(r, SP_ATTR_UNIT);
        st = r->st;
    } else if (kw(r, "dense")) {
        st = dense_attr(r, out);
    } else if (kw(r, "array")) {
        st = dense_array_attr(r, out);
    } else if (c == '(' || c == '!' || (c >= 0 && is_id_start((char)c))) {
        /* a type used as an attribute, or a dialect keyword with a body */
        const char *start = r->p;
        sp_attr *a = new_attr(r, SP_ATTR_TYPE);
        if (a == NULL || type(r, &a->u.type) != CM_OK) {
            st = r->st;
        } else {
            (void)start;
            *out = a;
        }
    } else {
        st = fail(r, "expected an attribute value");
    }
    r->depth--;
    return st;
}

/* ---- locations ------------------------------------------------------------------ */

/* A `#locN` reference, until parse_module resolves it in place. */
#define LOC_REF ((sp_loc_kind)(SP_LOC_FUSED + 1))
#define MAX_LOC_DEPTH 64

static sp_loc *new_loc(rd *r, sp_loc_kind kind)
{
    sp_loc *l = cm_arena_zalloc(&r->m->arena, sizeof *l);
    if (l == NULL) {
        oom(r);
        return NULL;
    }
    l->kind = kind;
    return l;
}

static cm_status loc_body(rd *r, sp_loc **out, int depth);

/* `[a, b, ...]` of a fused location, or `(child)` of a name one: the
 * members into l->kids. */
static cm_status loc_kids(rd *r, sp_loc *l, char close, int depth)
{
    sp_loc *local[16];
    sp_loc **v = local;
    uint32_t n = 0, cap = 16;
    cm_status st = CM_OK;
    if (!(close == ']' && eat(r, ']'))) {
        do {
            if (n == cap) {
                if (cap >= (1u << 20)) {
                    st = fail(r, "too many fused locations");
                    goto out;
                }
                sp_loc **g = cm_alloc(sizeof(sp_loc *) * cap * 2);
                if (g == NULL) {
                    st = oom(r);
                    goto out;
                }
                memcpy(g, v, sizeof(sp_loc *) * n);
                if (v != local) {
                    cm_free(v);
                }
                v = g;
                cap *= 2;
            }
            if (loc_body(r, &v[n], depth + 1) != CM_OK) {
                st = r->st;
                goto out;
            }
            n++;
        } while (close == ']' && eat(r, ','));
        if (expect(r, close) != CM_OK) {
            st = r->st;
            goto out;
        }
    }
    l->n_kids = n;
    l->kids = n > 0 ? adup(r, v, n, sizeof(sp_loc *)) : NULL;
    if (n > 0 && l->kids == NULL) {
        st = oom(r);
    }
out:
    if (v != local) {
        cm_free(v);
    }
    return st;
}

/* One location without its `loc(...)`: unknown, "file":L:C [to [L]:C],
 * "name" ["(" loc ")"], callsite(loc at loc), fused[<metadata>][locs...],
 * or a #alias reference. */
static cm_status loc_body(rd *r, sp_loc **out, int depth)
{
    if (depth > MAX_LOC_DEPTH) {
        return fail(r, "locations nested too deeply");
    }
    int c = peek(r);
    sp_loc *l;
    if (c == '#') {
        const char *at = r->p++;
        const char *s;
        uint32_t n = r->p < r->end && is_id_start(*r->p) ? ident(r, &s) : 0;
        if (n == 0) {
            return fail_at(r, at, "expected a location alias name after '#'");
        }
        if ((l = new_loc(r, LOC_REF)) == NULL) {
            return r->st;
        }
        l->str = astr(r, s, n);
        pos_of(r, at, &l->line, &l->col);
        if (CM_GROW_U32(r->loc_refs, r->cap_loc_refs, r->n_loc_refs + 1, NULL) != CM_OK) {
            return oom(r);
        }
        r->loc_refs[r->n_loc_refs++] = l;
    } else if (c == '"') {
        const char *s;
        size_t n;
        if (string_lit(r, &s, &n) != CM_OK) {
            return r->st;
        }
        if (r->p < r->end && *r->p == ':') {
            int64_t line, col = 0;
            r->p++;
            if (integer(r, &line) != CM_OK) {
                return r->st;
            }
            if (r->p < r->end && *r->p == ':') {
                r->p++;
                if (integer(r, &col) != CM_OK) {
                    return r->st;
                }
            }
            if (kw(r, "to")) { /* a range: its end is kept in the text only */
                int64_t e;
                if (peek(r) != ':' && integer(r, &e) != CM_OK) {
                    return r->st;
                }
                if (r->p < r->end && *r->p == ':') {
                    r->p++;
                    if (integer(r, &e) != CM_OK) {
                        return r->st;
                    }
                }
            }
            if (line < 0 || line > UINT32_MAX || col < 0 || col > UINT32_MAX) {
                return fail(r, "location line or column out of range");
            }
            if ((l = new_loc(r, SP_LOC_FILE)) == NULL) {
                return r->st;
            }
            l->line = (uint32_t)line;
            l->col = (uint32_t)col;
        } else {
            if ((l = new_loc(r, SP_LOC_NAME)) == NULL) {
                return r->st;
            }
            if (r->p < r->end && *r->p == '(') {
                r->p++;
                if (loc_kids(r, l, ')', depth) != CM_OK) {
                    return r->st;
                }
            }
        }
        l->str = s;
    } else if (kw(r, "unknown")) {
        if ((l = new_loc(r, SP_LOC_UNKNOWN)) == NULL) {
            return r->st;
        }
    } else if (kw(r, "callsite")) {
        if ((l = new_loc(r, SP_LOC_CALLSITE)) == NULL) {
            return r->st;
        }
        sp_loc *k[2];
        if (expect(r, '(') != CM_OK || loc_body(r, &k[0], depth + 1) != CM_OK ||
            expect_kw(r, "at") != CM_OK || loc_body(r, &k[1], depth + 1) != CM_OK ||
            expect(r, ')') != CM_OK) {
            return r->st;
        }
        l->kids = adup(r, k, 2, sizeof(sp_loc *));
        if (l->kids == NULL) {
            return oom(r);
        }
        l->n_kids = 2;
    } else if (kw(r, "fused")) {
        if ((l = new_loc(r, SP_LOC_FUSED)) == NULL) {
            return r->st;
        }
        if (peek(r) == '<') {
            const char *m0 = r->p;
            if (skip_group(r) != CM_OK) {
                return r->st;
            }
            l->str = astr(r, m0 + 1, (size_t)(r->p - m0 - 2));
        }
        if (expect(r, '[') != CM_OK || loc_kids(r, l, ']', depth) != CM_OK) {
            return r->st;
        }
    } else {
        return fail(r, "expected a location (\"file\":line:col, \"name\", callsite(...), "
                       "fused[...], unknown or #alias)");
    }
    *out = l;
    return CM_OK;
}

/* `loc(...)` at the cursor (peek_kw said so): its text inside the parens
 * (arena) and the location, references unresolved until the end. */
static cm_status loc_clause(rd *r, const char **text_out, sp_loc **where_out)
{
    kw(r, "loc");
    ws(r);
    const char *ls = r->p;
    if (r->p >= r->end || *r->p != '(') {
        return fail(r, "expected '(' after loc");
    }
    r->p++;
    sp_loc *l;
    if (loc_body(r, &l, 0) != CM_OK || expect(r, ')') != CM_OK) {
        return r->st;
    }
    if (text_out != NULL && (*text_out = astr(r, ls + 1, (size_t)(r->p - ls - 2))) == NULL) {
        return r->st;
    }
    if (where_out != NULL) {
        *where_out = l;
    }
    return CM_OK;
}

/* Resolves reference l in place: it becomes a copy of the aliased location
 * (itself resolved first). */
static cm_status loc_resolve(rd *r, sp_loc *l, int depth)
{
    if (l->kind != LOC_REF) {
        return CM_OK;
    }
    char path[32];
    snprintf(path, sizeof path, "%u:%u", l->line, l->col);
    if (depth > MAX_LOC_DEPTH) {
        r->st = cm_error_set(r->err, CM_EINVAL, path,
                             "location alias '#%s' refers to itself through its aliases", l->str);
        return r->st;
    }
    for (uint32_t i = 0; i < r->n_loc_aliases; i++) {
        if (strcmp(r->loc_aliases[i].name, l->str) == 0) {
            sp_loc *t = r->loc_aliases[i].loc;
            if (loc_resolve(r, t, depth + 1) != CM_OK) {
                return r->st;
            }
            *l = *t;
            return CM_OK;
        }
    }
    r->st = cm_error_set(r->err, CM_EINVAL, path, "undefined location alias '#%s'", l->str);
    return r->st;
}

/* ---- ops -------------------------------------------------------------------------- */

/* An op under construction: stack marks for operands, attrs, types, regions. */
typedef struct opb {
    const char *name;
    uint32_t ops0, attrs0, types0, regions0; /* stack marks */
    uint32_t n_regions;
    uint32_t region_sizes[16]; /* blocks per region */
    const char *loc;
    sp_loc *where;
} opb;

static void opb_begin(rd *r, opb *b, const char *name)
{
    b->name = name;
    b->ops0 = r->ops.n;
    b->attrs0 = r->attrs.n;
    b->types0 = r->types.n;
    b->regions0 = r->blocks.n;
    b->n_regions = 0;
    b->loc = NULL;
    b->where = NULL;
}

static cm_status parse_op(rd *r, uint32_t block);
static cm_status parse_region(rd *r, opb *b, const uint32_t *arg_types, const char *const *arg_names,
                              const uint32_t *arg_name_lens, uint32_t n_args);

static uint32_t n_operands(const rd *r, const opb *b)
{
    return r->ops.n - b->ops0;
}

/* Comma-separated value uses (possibly none). */
static cm_status operand_list(rd *r)
{
    if (peek(r) != '%') {
        return CM_OK;
    }
    for (;;) {
        uint32_t v;
        if (value_use(r, &v) != CM_OK || u32_push(r, &r->ops, v) != CM_OK) {
            return r->st;
        }
        if (peek(r) != ',') {
            return CM_OK;
        }
        /* a comma may also start a keyword clause: look past it */
        const char *save = r->p;
        uint32_t line = r->line;
        const char *ls = r->line_start;
        r->p++;
        if (peek(r) != '%') {
            r->p = save;
            r->line = line;
            r->line_start = ls;
            return CM_OK;
        }
    }
}

static cm_status opt_attr_dict(rd *r)
{
    if (peek(r) == '{') {
        uint32_t n;
        return attr_dict_entries(r, &n);
    }
    return CM_OK;
}

/* Pushes the types of a parenthesised list or a single type. */
static cm_status type_list_parens(rd *r, uint32_t *count)
{
    *count = 0;
    if (expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (eat(r, ')')) {
        return CM_OK;
    }
    do {
        uint32_t t;
        if (type(r, &t) != CM_OK || u32_push(r, &r->types, t) != CM_OK) {
            return r->st;
        }
        (*count)++;
    } while (eat(r, ','));
    return expect(r, ')');
}

/* Result types after '->': `(T1, T2)` or `T`. A parenthesised list is told
 * apart from a function type by what follows it. */
static cm_status result_types(rd *r, uint32_t *count)
{
    if (peek(r) == '(') {
        const char *save = r->p;
        uint32_t line = r->line;
        const char *ls = r->line_start;
        uint32_t t0 = r->types.n;
        if (type_list_parens(r, count) != CM_OK) {
            return r->st;
        }
        if (!eat_arrow(r)) {
            return CM_OK;
        }
        /* it was a function type: re-read as a single type */
        r->types.n = t0;
        r->p = save;
        r->line = line;
        r->line_start = ls;
    }
    uint32_t t;
    if (type(r, &t) != CM_OK || u32_push(r, &r->types, t) != CM_OK) {
        return r->st;
    }
    *count = 1;
    return CM_OK;
}

/* Checks the operand types against types[t0 .. t0+n). */
static cm_status check_operand_types(rd *r, const opb *b, const uint32_t *tys, uint32_t n,
                                     const char *at)
{
    uint32_t no = n_operands(r, b);
    if (n != no) {
        return fail_at(r, at, "'%s' has %u operands but its type lists %u", b->name, no, n);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = r->ops.v[b->ops0 + i];
        if (r->m->values[v].type != tys[i]) {
            return fail_at(r, at, "operand %u of '%s' has type %s but the op type says %s", i,
                           b->name, r->m->types[r->m->values[v].type].text, r->m->types[tys[i]].text);
        }
    }
    return CM_OK;
}

/* `: (Ts) -> Rs` for the op under construction; results pushed after. */
static cm_status functional_type(rd *r, opb *b, uint32_t *n_results)
{
    const char *at = r->p;
    uint32_t n_in;
    uint32_t t0 = r->types.n;
    if (type_list_parens(r, &n_in) != CM_OK) {
        return r->st;
    }
    if (check_operand_types(r, b, n_in > 0 ? r->types.v + t0 : NULL, n_in, at) != CM_OK) {
        return r->st;
    }
    r->types.n = t0; /* drop operand types; keep only results */
    if (!eat_arrow(r)) {
        return fail(r, "expected '->' in op type");
    }
    return result_types(r, n_results);
}

/* Creates the op from the builder; binds result names. */
static cm_status finish_op(rd *r, opb *b, uint32_t block, uint32_t line, uint32_t col,
                           const char *const *res_names, const uint32_t *res_lens,
                           const uint32_t *res_counts, uint32_t n_res_names, uint32_t *op_out)
{
    uint32_t n_res = r->types.n - b->types0;
    uint32_t total = 0;
    for (uint32_t i = 0; i < n_res_names; i++) {
        total += res_counts[i];
    }
    if (n_res_names > 0 && total != n_res) {
        return fail_at(r, res_names[0], "'%s' has %u results but %u are named", b->name, n_res,
                       total);
    }
    /* optional trailing location */
    if (peek_kw(r, "loc") && loc_clause(r, &b->loc, &b->where) != CM_OK) {
        return r->st;
    }
    uint32_t op;
    const char *name = b->name;
    /* (a stack never pushed to has a NULL base: no pointer arithmetic on it) */
    const uint32_t *opv = n_operands(r, b) > 0 ? r->ops.v + b->ops0 : NULL;
    const uint32_t *tyv = n_res > 0 ? r->types.v + b->types0 : NULL;
    if (sp_module_new_op(r->m, block, name, opv, n_operands(r, b), tyv, n_res, &op) != CM_OK) {
        return oom(r);
    }
    sp_op *o = &r->m->ops[op];
    o->line = line;
    o->col = col;
    o->loc = b->loc;
    o->where = b->where;
    uint32_t na = r->attrs.n - b->attrs0;
    o->attrs = pop_attrs(r, na);
    o->n_attrs = na;
    if (b->n_regions > 0) {
        if (sp_op_add_regions(r->m, op, b->n_regions) != CM_OK) {
            return oom(r);
        }
        uint32_t k = b->regions0;
        for (uint32_t i = 0; i < b->n_regions; i++) {
            for (uint32_t j = 0; j < b->region_sizes[i]; j++) {
                if (sp_region_add_block(r->m, op, i, r->blocks.v[k++]) != CM_OK) {
                    return oom(r);
                }
            }
        }
    }
    r->ops.n = b->ops0;
    r->types.n = b->types0;
    r->blocks.n = b->regions0;
    uint32_t first = r->m->ops[op].first_result;
    for (uint32_t i = 0; i < n_res_names; i++) {
        if (define_name(r, res_names[i], res_lens[i], first, res_counts[i]) != CM_OK) {
            return r->st;
        }
        first += res_counts[i];
    }
    if (op_out != NULL) {
        *op_out = op;
    }
    return r->st;
}

/* ---- generic form ------------------------------------------------------------------- */

static cm_status generic_op(rd *r, opb *b)
{
    if (expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (!eat(r, ')')) {
        if (operand_list(r) != CM_OK || expect(r, ')') != CM_OK) {
            return r->st;
        }
    }
    if (peek(r) == '[') {
        return fail(r, "ops with successor blocks are not supported");
    }
    if (peek(r) == '<') {
        /* properties: <{...}> */
        r->p++;
        if (peek(r) != '{') {
            return fail(r, "expected '{' after '<' (properties)");
        }
        if (opt_attr_dict(r) != CM_OK || expect(r, '>') != CM_OK) {
            return r->st;
        }
    }
    if (peek(r) == '(') {
        r->p++;
        do {
            if (parse_region(r, b, NULL, NULL, NULL, 0) != CM_OK) {
                return r->st;
            }
        } while (eat(r, ','));
        if (expect(r, ')') != CM_OK) {
            return r->st;
        }
    }
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t n;
    return functional_type(r, b, &n);
}

/* ---- keyword-style custom forms ----------------------------------------------------- */

static cm_status enum_attr(rd *r, const char *kind, sp_attr **out)
{
    const char *s;
    uint32_t n = ident(r, &s);
    if (n == 0) {
        return fail(r, "expected an enum keyword");
    }
    sp_attr *a = new_attr(r, SP_ATTR_ENUM);
    if (a == NULL) {
        return r->st;
    }
    a->u.enm.dialect = "stablehlo";
    a->u.enm.kind = kind;
    a->u.enm.value = astr(r, s, n);
    *out = a;
    return r->st;
}

static cm_status int_list(rd *r, int64_t *v, uint32_t *n, uint32_t max)
{
    *n = 0;
    if (expect(r, '[') != CM_OK) {
        return r->st;
    }
    if (eat(r, ']')) {
        return CM_OK;
    }
    do {
        if (*n >= max) {
            return fail(r, "too many values (max %u)", max);
        }
        if (integer(r, &v[*n]) != CM_OK) {
            return r->st;
        }
        (*n)++;
    } while (eat(r, ','));
    return expect(r, ']');
}

static sp_attr *darr_attr(rd *r, const int64_t *v, uint32_t n, const char *elem)
{
    sp_attr *a = new_attr(r, SP_ATTR_DENSE_ARRAY);
    if (a == NULL) {
        return NULL;
    }
    a->u.darr.elem = elem;
    a->u.darr.n = n;
    a->u.darr.v = n > 0 ? adup(r, v, n, sizeof(int64_t)) : NULL;
    return r->st == CM_OK ? a : NULL;
}

/* Finds or creates the dot_dimension_numbers PARAMS attribute on the stack. */
static sp_attr *dot_dims_attr(rd *r, const opb *b)
{
    for (uint32_t i = b->attrs0; i < r->attrs.n; i++) {
        if (strcmp(r->attrs.v[i].name, "dot_dimension_numbers") == 0) {
            return r->attrs.v[i].value;
        }
    }
    sp_attr *a = new_attr(r, SP_ATTR_PARAMS);
    if (a == NULL) {
        return NULL;
    }
    a->u.params.name = "stablehlo.dot";
    a->u.params.items = cm_arena_zalloc(&r->m->arena, sizeof(sp_named_attr) * 4);
    if (a->u.params.items == NULL) {
        oom(r);
        return NULL;
    }
    if (attr_push(r, "dot_dimension_numbers", a) != CM_OK) {
        return NULL;
    }
    return a;
}

static cm_status clause(rd *r, opb *b, const sp_clause *c)
{
    sp_attr *a = NULL;
    int64_t v[SP_MAX_RANK * 2];
    uint32_t n;
    switch (c->kind) {
    case SP_CL_DARR:
        if (int_list(r, v, &n, SP_MAX_RANK * 2) != CM_OK) {
            return r->st;
        }
        a = darr_attr(r, v, n, "i64");
        break;
    case SP_CL_INT:
        if (integer(r, &v[0]) != CM_OK) {
            return r->st;
        }
        a = int_attr(r, v[0], c->int_type);
        break;
    case SP_CL_BOOL:
        a = new_attr(r, SP_ATTR_BOOL);
        if (a == NULL) {
            return r->st;
        }
        if (kw(r, "true")) {
            a->u.b = true;
        } else if (!kw(r, "false")) {
            return fail(r, "expected true or false");
        }
        break;
    case SP_CL_ENUM:
        if (enum_attr(r, c->enum_kind, &a) != CM_OK) {
            return r->st;
        }
        break;
    case SP_CL_STR:
        a = new_attr(r, SP_ATTR_STRING);
        if (a == NULL || string_lit(r, &a->u.str.s, &a->u.str.len) != CM_OK) {
            return r->st;
        }
        break;
    case SP_CL_PRECISION: {
        if (expect(r, '[') != CM_OK) {
            return r->st;
        }
        sp_attr *items[16];
        n = 0;
        if (!eat(r, ']')) {
            do {
                if (n >= 16) {
                    return fail(r, "too many precision values");
                }
                if (enum_attr(r, "precision", &items[n]) != CM_OK) {
                    return r->st;
                }
                n++;
            } while (eat(r, ','));
            if (expect(r, ']') != CM_OK) {
                return r->st;
            }
        }
        a = new_attr(r, SP_ATTR_ARRAY);
        if (a == NULL) {
            return r->st;
        }
        a->u.arr.n = n;
        a->u.arr.items = n > 0 ? adup(r, items, n, sizeof(sp_attr *)) : NULL;
        break;
    }
    case SP_CL_FORMAT: {
        /* e8m10 */
        ws(r);
        if (r->p >= r->end || *r->p != 'e') {
            return fail(r, "expected a format like e8m10");
        }
        r->p++;
        int64_t e, mnt;
        if (integer(r, &e) != CM_OK) {
            return r->st;
        }
        if (r->p >= r->end || *r->p != 'm') {
            return fail(r, "expected 'm' in format");
        }
        r->p++;
        if (integer(r, &mnt) != CM_OK) {
            return r->st;
        }
        if (attr_push(r, "exponent_bits", int_attr(r, e, "i32")) != CM_OK) {
            return r->st;
        }
        a = int_attr(r, mnt, "i32");
        return a == NULL ? r->st : attr_push(r, "mantissa_bits", a);
    }
    case SP_CL_DOTDIMS: {
        int64_t w[SP_MAX_RANK];
        uint32_t nl, nr;
        if (int_list(r, v, &nl, SP_MAX_RANK) != CM_OK || expect_kw(r, "x") != CM_OK ||
            int_list(r, w, &nr, SP_MAX_RANK) != CM_OK) {
            return r->st;
        }
        sp_attr *d = dot_dims_attr(r, b);
        if (d == NULL) {
            return r->st;
        }
        bool batch = c->key[0] == 'b';
        sp_named_attr *it = d->u.params.items;
        /* canonical order: lhs_batching, rhs_batching, lhs_contracting, rhs_contracting */
        uint32_t base = batch ? 0 : 2;
        it[base].name = batch ? "lhs_batching_dimensions" : "lhs_contracting_dimensions";
        it[base].value = int_array_attr(r, v, nl);
        it[base + 1].name = batch ? "rhs_batching_dimensions" : "rhs_contracting_dimensions";
        it[base + 1].value = int_array_attr(r, w, nr);
        /* compact: keep only the present entries, in order */
        uint32_t k = 0;
        sp_named_attr all[4];
        for (uint32_t i = 0; i < 4; i++) {
            if (it[i].name != NULL) {
                all[k++] = it[i];
            }
        }
        sp_named_attr *fresh = cm_arena_zalloc(&r->m->arena, sizeof(sp_named_attr) * 4);
        if (fresh == NULL) {
            return oom(r);
        }
        /* keep a 4-slot layout for later clauses; n counts the present ones */
        for (uint32_t i = 0; i < 4; i++) {
            fresh[i] = it[i];
        }
        d->u.params.items = fresh;
        d->u.params.n = 4;
        (void)all;
        return r->st;
    }
    case SP_CL_ALGORITHM:
        if (params_body(r, "stablehlo.dot_algorithm", &a) != CM_OK) {
            return r->st;
        }
        break;
    }
    if (a == NULL) {
        return r->st != CM_OK ? r->st : oom(r);
    }
    return attr_push(r, c->attr, a);
}

/* Removes empty slots of a dot_dimension_numbers built from clauses. */
static void compact_dot_dims(rd *r, const opb *b)
{
    for (uint32_t i = b->attrs0; i < r->attrs.n; i++) {
        sp_attr *a = r->attrs.v[i].value;
        if (strcmp(r->attrs.v[i].name, "dot_dimension_numbers") == 0 && a->kind == SP_ATTR_PARAMS) {
            uint32_t k = 0;
            for (uint32_t j = 0; j < a->u.params.n; j++) {
                if (a->u.params.items[j].name != NULL) {
                    a->u.params.items[k++] = a->u.params.items[j];
                }
            }
            a->u.params.n = k;
        }
    }
}

static cm_status keyword_op(rd *r, opb *b, const sp_pretty *pd)
{
    const char *op_start = r->p;
    /* StableHLO prints a barrier's attribute dictionary before its operands */
    if (pd->kind == SP_OP_OPTIMIZATION_BARRIER && peek(r) == '{' && opt_attr_dict(r) != CM_OK) {
        return r->st;
    }
    if (pd->kind == SP_OP_OPTIMIZATION_BARRIER && peek(r) == '(') {
        /* `stablehlo.optimization_barrier()`: no operands, no types */
        r->p++;
        if (expect(r, ')') != CM_OK) {
            return r->st;
        }
        return opt_attr_dict(r);
    }
    if (operand_list(r) != CM_OK) {
        return r->st;
    }
    /* keyword clauses: `, key = value` (the first may follow the op name directly) */
    for (;;) {
        ws(r);
        const char *save = r->p;
        uint32_t line = r->line;
        const char *ls = r->line_start;
        if (n_operands(r, b) > 0 && !eat(r, ',')) {
            break;
        }
        const char *k;
        uint32_t kn = ident(r, &k);
        const sp_clause *c = NULL;
        for (int i = 0; kn > 0 && i < SP_MAX_CLAUSES && pd->clauses[i].key != NULL; i++) {
            if (strlen(pd->clauses[i].key) == kn && memcmp(pd->clauses[i].key, k, kn) == 0) {
                c = &pd->clauses[i];
            }
        }
        if (c == NULL) {
            if (n_operands(r, b) > 0 || kn > 0) {
                if (kn > 0 && peek(r) == '=') {
                    return fail_at(r, k, "unknown keyword '%.*s' for '%s'", (int)kn, k, b->name);
                }
            }
            r->p = save;
            r->line = line;
            r->line_start = ls;
            break;
        }
        if (expect(r, '=') != CM_OK || clause(r, b, c) != CM_OK) {
            return r->st;
        }
    }
    compact_dot_dims(r, b);
    if (opt_attr_dict(r) != CM_OK) {
        return r->st;
    }
    uint32_t no = n_operands(r, b);
    if (pd->kind == SP_OP_RETURN && peek(r) != ':') {
        if (no != 0) {
            return fail(r, "expected ':' and the operand types");
        }
        return CM_OK;
    }
    if (expect(r, ':') != CM_OK) {
        return r->st;
    }
    const char *at = r->p;
    uint32_t nres;
    if (pd->typing == SP_TY_LIST) {
        uint32_t t0 = r->types.n;
        uint32_t cnt = 0;
        if (!(peek(r) == '(' && pd->kind == SP_OP_OPTIMIZATION_BARRIER && no == 0)) {
            do {
                uint32_t t;
                if (type(r, &t) != CM_OK || u32_push(r, &r->types, t) != CM_OK) {
                    return r->st;
                }
                cnt++;
            } while (eat(r, ','));
        }
        if (check_operand_types(r, b, cnt > 0 ? r->types.v + t0 : NULL, cnt, at) != CM_OK) {
            return r->st;
        }
        if (pd->kind == SP_OP_RETURN) {
            r->types.n = t0; /* a terminator has no results */
        }
        return CM_OK;
    }
    if (peek(r) == '(') {
        /* functional form (allowed for every typing) */
        return functional_type(r, b, &nres);
    }
    if (pd->typing == SP_TY_FUNC) {
        return fail_at(r, op_start, "'%s' needs a functional type `(operands) -> result`", b->name);
    }
    uint32_t t;
    if (type(r, &t) != CM_OK) {
        return r->st;
    }
    if (pd->typing == SP_TY_SELECT) {
        uint32_t t2;
        if (expect(r, ',') != CM_OK || type(r, &t2) != CM_OK) {
            return r->st;
        }
        uint32_t tys[3] = {t, t2, t2};
        if (check_operand_types(r, b, tys, no < 3 ? no : 3, at) != CM_OK || no != 3) {
            return r->st != CM_OK ? r->st : fail_at(r, at, "select takes 3 operands");
        }
        return u32_push(r, &r->types, t2);
    }
    for (uint32_t i = 0; i < no; i++) {
        uint32_t v = r->ops.v[b->ops0 + i];
        if (r->m->values[v].type != t) {
            return fail_at(r, at, "operand %u of '%s' has type %s, expected %s", i, b->name,
                           r->m->types[r->m->values[v].type].text, r->m->types[t].text);
        }
    }
    return u32_push(r, &r->types, t);
}

/* ---- hand-written custom forms ----------------------------------------------------- */

/* stablehlo.constant / sdy.constant: attr-dict dense<...> : T */
static cm_status constant_op(rd *r, opb *b)
{
    if (opt_attr_dict(r) != CM_OK) {
        return r->st;
    }
    if (peek(r) == '(') {
        /* generic-looking form `stablehlo.constant() <{value = ...}> : () -> T` */
        r->p++;
        if (expect(r, ')') != CM_OK) {
            return r->st;
        }
        if (peek(r) == '<') {
            r->p++;
            if (opt_attr_dict(r) != CM_OK || expect(r, '>') != CM_OK) {
                return r->st;
            }
        }
        if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
            return r->st;
        }
        uint32_t n;
        return functional_type(r, b, &n);
    }
    sp_attr *v;
    if (attr_value(r, &v) != CM_OK) {
        return r->st;
    }
    uint32_t t;
    if (v->kind == SP_ATTR_DENSE) {
        t = v->u.dense.type;
    } else {
        return fail(r, "expected a dense<...> : type constant value");
    }
    if (attr_push(r, "value", v) != CM_OK) {
        return r->st;
    }
    return u32_push(r, &r->types, t);
}

/* stablehlo.compare DIR, %a, %b [, TYPE] attr-dict : types */
static cm_status compare_op(rd *r, opb *b)
{
    sp_attr *d;
    if (enum_attr(r, "comparison_direction", &d) != CM_OK || attr_push(r, "comparison_direction", d) != CM_OK ||
        expect(r, ',') != CM_OK || operand_list(r) != CM_OK) {
        return r->st;
    }
    if (eat(r, ',')) {
        sp_attr *t;
        if (enum_attr(r, "comparison_type", &t) != CM_OK || attr_push(r, "compare_type", t) != CM_OK) {
            return r->st;
        }
    }
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t n;
    return functional_type(r, b, &n);
}

/* stablehlo.slice %a [s:l(:st)?, ...] attr-dict : (T) -> R */
static cm_status slice_op(rd *r, opb *b)
{
    if (operand_list(r) != CM_OK || expect(r, '[') != CM_OK) {
        return r->st;
    }
    int64_t s[SP_MAX_RANK], l[SP_MAX_RANK], st[SP_MAX_RANK];
    uint32_t n = 0;
    if (!eat(r, ']')) {
        do {
            if (n >= SP_MAX_RANK) {
                return fail(r, "too many slice dimensions");
            }
            if (integer(r, &s[n]) != CM_OK || expect(r, ':') != CM_OK || integer(r, &l[n]) != CM_OK) {
                return r->st;
            }
            st[n] = 1;
            if (eat(r, ':') && integer(r, &st[n]) != CM_OK) {
                return r->st;
            }
            n++;
        } while (eat(r, ','));
        if (expect(r, ']') != CM_OK) {
            return r->st;
        }
    }
    if (attr_push(r, "start_indices", darr_attr(r, s, n, "i64")) != CM_OK ||
        attr_push(r, "limit_indices", darr_attr(r, l, n, "i64")) != CM_OK ||
        attr_push(r, "strides", darr_attr(r, st, n, "i64")) != CM_OK) {
        return r->st;
    }
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t k;
    return functional_type(r, b, &k);
}

/* `@name` or `@"name"` into a new string attribute; what names the symbol
 * in the error when the name is missing ("expected a <what> name"). */
static cm_status symbol_attr(rd *r, const char *what, sp_attr **out)
{
    if (expect(r, '@') != CM_OK) {
        return r->st;
    }
    sp_attr *a = new_attr(r, SP_ATTR_STRING);
    if (a == NULL) {
        return r->st;
    }
    if (peek(r) == '"') {
        if (string_lit(r, &a->u.str.s, &a->u.str.len) != CM_OK) {
            return r->st;
        }
    } else {
        const char *s;
        uint32_t n = ident(r, &s);
        if (n == 0) {
            return fail(r, "expected a %s name", what);
        }
        a->u.str.s = astr(r, s, n);
        a->u.str.len = n;
    }
    *out = a;
    return CM_OK;
}

/* `@name` or `@"quoted name"` (`@"<lambda>"`): the name's bytes, in the
 * input for a bare name, decoded into the arena for a quoted one. */
static cm_status bare_symbol(rd *r, const char *what, const char **s_out, uint32_t *n_out)
{
    if (expect(r, '@') != CM_OK) {
        return r->st;
    }
    if (r->p < r->end && *r->p == '"') {
        size_t n;
        if (string_lit(r, s_out, &n) != CM_OK) {
            return r->st;
        }
        if (n == 0 || n > UINT32_MAX) {
            return fail(r, "expected a %s name", what);
        }
        *n_out = (uint32_t)n;
        return CM_OK;
    }
    *n_out = ident(r, s_out);
    return *n_out == 0 ? fail(r, "expected a %s name", what) : CM_OK;
}

/* stablehlo.custom_call @target(%a, ...) attr-dict : (Ts) -> Rs */
static cm_status custom_call_op(rd *r, opb *b)
{
    sp_attr *t;
    if (symbol_attr(r, "call target", &t) != CM_OK) {
        return r->st;
    }
    if (attr_push(r, "call_target_name", t) != CM_OK || expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (!eat(r, ')') && (operand_list(r) != CM_OK || expect(r, ')') != CM_OK)) {
        return r->st;
    }
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t n;
    return functional_type(r, b, &n);
}

/* stablehlo.convolution(%a, %b) dim_numbers = ..., window = {...} attr-dict : (Ts) -> R */
static cm_status convolution_op(rd *r, opb *b)
{
    if (expect(r, '(') != CM_OK || operand_list(r) != CM_OK || expect(r, ')') != CM_OK) {
        return r->st;
    }
    if (expect_kw(r, "dim_numbers") != CM_OK || expect(r, '=') != CM_OK) {
        return r->st;
    }
    sp_attr *d;
    if (conv_dims(r, &d) != CM_OK || attr_push(r, "dimension_numbers", d) != CM_OK) {
        return r->st;
    }
    if (eat(r, ',')) {
        if (expect_kw(r, "window") != CM_OK || expect(r, '=') != CM_OK || expect(r, '{') != CM_OK) {
            return r->st;
        }
        if (!eat(r, '}')) {
            do {
                const char *k;
                uint32_t kn = ident(r, &k);
                if (expect(r, '=') != CM_OK) {
                    return r->st;
                }
                int64_t v[SP_MAX_RANK * 2];
                uint32_t n = 0;
                if (kn == 3 && memcmp(k, "pad", 3) == 0) {
                    /* [[lo, hi], ...] -> dense<[[..]]> : tensor<Nx2xi64> */
                    if (expect(r, '[') != CM_OK) {
                        return r->st;
                    }
                    uint32_t rows = 0;
                    if (!eat(r, ']')) {
                        do {
                            uint32_t k2;
                            if (rows >= SP_MAX_RANK || int_list(r, v + 2 * rows, &k2, 2) != CM_OK) {
                                return r->st != CM_OK ? r->st : fail(r, "too many pad rows");
                            }
                            if (k2 != 2) {
                                return fail(r, "each pad entry needs [low, high]");
                            }
                            rows++;
                        } while (eat(r, ','));
                        if (expect(r, ']') != CM_OK) {
                            return r->st;
                        }
                    }
                    cm_buf tb;
                    cm_buf_init(&tb);
                    cm_buf_printf(&tb, "tensor<%ux2xi64>", rows);
                    sp_attr *a = new_attr(r, SP_ATTR_DENSE);
                    if (a == NULL) {
                        cm_buf_fini(&tb);
                        return r->st;
                    }
                    cm_error e;
                    cm_error_clear(&e);
                    if (tb.oom || sp_module_intern_type(r->m, tb.data, tb.len, &a->u.dense.type, &e) != CM_OK) {
                        cm_buf_fini(&tb);
                        return oom(r);
                    }
                    cm_buf_fini(&tb);
                    cm_buf body;
                    cm_buf_init(&body);
                    cm_buf_putc(&body, '[');
                    for (uint32_t i = 0; i < rows; i++) {
                        cm_buf_printf(&body, "%s[%lld, %lld]", i ? ", " : "", (long long)v[2 * i],
                                      (long long)v[2 * i + 1]);
                    }
                    cm_buf_putc(&body, ']');
                    a->u.dense.body = body.oom ? NULL : astr(r, body.data, body.len);
                    cm_buf_fini(&body);
                    a->u.dense.ints = adup(r, v, rows * 2, sizeof(int64_t));
                    a->u.dense.n_ints = rows * 2;
                    if (a->u.dense.body == NULL || attr_push(r, "padding", a) != CM_OK) {
                        return r->st != CM_OK ? r->st : oom(r);
                    }
                    continue;
                }
                const char *name = NULL, *elem = "i64";
                if (kn == 6 && memcmp(k, "stride", 6) == 0) {
                    name = "window_strides";
                } else if (kn == 10 && memcmp(k, "lhs_dilate", 10) == 0) {
                    name = "lhs_dilation";
                } else if (kn == 10 && memcmp(k, "rhs_dilate", 10) == 0) {
                    name = "rhs_dilation";
                } else if (kn == 7 && memcmp(k, "reverse", 7) == 0) {
                    name = "window_reversal";
                    elem = "i1";
                } else {
                    return fail_at(r, k, "unknown window attribute '%.*s'", (int)kn, k);
                }
                if (expect(r, '[') != CM_OK) {
                    return r->st;
                }
                if (!eat(r, ']')) {
                    do {
                        if (n >= SP_MAX_RANK) {
                            return fail(r, "too many window values");
                        }
                        if (kw(r, "true")) {
                            v[n] = 1;
                        } else if (kw(r, "false")) {
                            v[n] = 0;
                        } else if (integer(r, &v[n]) != CM_OK) {
                            return r->st;
                        }
                        n++;
                    } while (eat(r, ','));
                    if (expect(r, ']') != CM_OK) {
                        return r->st;
                    }
                }
                if (attr_push(r, name, darr_attr(r, v, n, elem)) != CM_OK) {
                    return r->st;
                }
            } while (eat(r, ','));
            if (expect(r, '}') != CM_OK) {
                return r->st;
            }
        }
    }
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t n;
    return functional_type(r, b, &n);
}

/* stablehlo.reduce(%a init: %i), ... [applies OP] across dimensions = [..] attr-dict
 *   : (Ts) -> Rs [reducer(%x: T, %y: T) (...) { body }] */
static cm_status reduce_op(rd *r, opb *b)
{
    uint32_t inputs[64], inits[64];
    uint32_t n = 0;
    do {
        if (n >= 64) {
            return fail(r, "too many reduce operands");
        }
        if (expect(r, '(') != CM_OK || value_use(r, &inputs[n]) != CM_OK ||
            expect_kw(r, "init") != CM_OK || expect(r, ':') != CM_OK ||
            value_use(r, &inits[n]) != CM_OK || expect(r, ')') != CM_OK) {
            return r->st;
        }
        n++;
    } while (eat(r, ','));
    for (uint32_t i = 0; i < n; i++) {
        if (u32_push(r, &r->ops, inputs[i]) != CM_OK) {
            return r->st;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (u32_push(r, &r->ops, inits[i]) != CM_OK) {
            return r->st;
        }
    }
    const char *applies = NULL;
    uint32_t applies_len = 0;
    if (kw(r, "applies")) {
        applies_len = ident(r, &applies);
        if (applies_len == 0) {
            return fail(r, "expected an op name after 'applies'");
        }
    }
    if (expect_kw(r, "across") != CM_OK || expect_kw(r, "dimensions") != CM_OK ||
        expect(r, '=') != CM_OK) {
        return r->st;
    }
    int64_t dims[SP_MAX_RANK];
    uint32_t nd;
    if (int_list(r, dims, &nd, SP_MAX_RANK) != CM_OK ||
        attr_push(r, "dimensions", darr_attr(r, dims, nd, "i64")) != CM_OK) {
        return r->st;
    }
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t nres;
    if (functional_type(r, b, &nres) != CM_OK) {
        return r->st;
    }
    /* element types of the inits are the block argument types */
    uint32_t arg_types[128];
    for (uint32_t i = 0; i < n; i++) {
        arg_types[i] = r->m->values[inits[i]].type;
        arg_types[n + i] = r->m->values[inits[i]].type;
    }
    if (applies != NULL) {
        /* build the body: ^bb0(%a: T, %b: T): %r = OP %a, %b; stablehlo.return %r
         * where T is the 0-d tensor of the first input's element type */
        if (n != 1) {
            return fail(r, "'applies' form needs exactly one input");
        }
        const sp_type *it = &r->m->types[r->m->values[inputs[0]].type];
        if (it->kind == SP_TYPE_TENSOR && it->elem != SP_ELEM_OTHER) {
            cm_error e;
            cm_error_clear(&e);
            if (sp_module_tensor_type(r->m, it->elem, NULL, 0, &arg_types[0], &e) != CM_OK) {
                return oom(r);
            }
        }
        uint32_t blk;
        if (sp_module_new_block(r->m, SP_NONE, &blk) != CM_OK) {
            return oom(r);
        }
        uint32_t a0, a1;
        if (sp_module_add_block_arg(r->m, blk, arg_types[0], &a0) != CM_OK ||
            sp_module_add_block_arg(r->m, blk, arg_types[0], &a1) != CM_OK) {
            return oom(r);
        }
        const char *opname = astr(r, applies, applies_len);
        uint32_t ops[2] = {a0, a1}, op;
        if (opname == NULL ||
            sp_module_new_op(r->m, blk, opname, ops, 2, &arg_types[0], 1, &op) != CM_OK) {
            return oom(r);
        }
        uint32_t res = r->m->ops[op].first_result;
        if (sp_module_new_op(r->m, blk, "stablehlo.return", &res, 1, NULL, 0, &op) != CM_OK) {
            return oom(r);
        }
        if (u32_push(r, &r->blocks, blk) != CM_OK) {
            return r->st;
        }
        b->region_sizes[b->n_regions++] = 1;
        return CM_OK;
    }
    /* reducer(%a: T, %c: T) (%b: T, %d: T) { ... } */
    if (expect_kw(r, "reducer") != CM_OK) {
        return r->st;
    }
    const char *names[128];
    uint32_t lens[128], tys[128];
    uint32_t na = 0;
    for (uint32_t g = 0; g < n; g++) {
        if (expect(r, '(') != CM_OK) {
            return r->st;
        }
        for (int k = 0; k < 2; k++) {
            if (k == 1 && expect(r, ',') != CM_OK) {
                return r->st;
            }
            lens[na] = ssa_name(r, &names[na]);
            if (lens[na] == 0 || expect(r, ':') != CM_OK || type(r, &tys[na]) != CM_OK) {
                return r->st != CM_OK ? r->st : fail(r, "expected a reducer argument");
            }
            /* JAX's debug info locates reducer arguments too (not printed back) */
            if (peek_kw(r, "loc") && loc_clause(r, NULL, NULL) != CM_OK) {
                return r->st;
            }
            na++;
        }
        if (expect(r, ')') != CM_OK) {
            return r->st;
        }
    }
    /* block order: first elements of every pair, then the second ones */
    const char *onames[128];
    uint32_t olens[128], otys[128];
    for (uint32_t g = 0; g < n; g++) {
        onames[g] = names[2 * g];
        olens[g] = lens[2 * g];
        otys[g] = tys[2 * g];
        onames[n + g] = names[2 * g + 1];
        olens[n + g] = lens[2 * g + 1];
        otys[n + g] = tys[2 * g + 1];
    }
    return parse_region(r, b, otys, onames, olens, 2 * n);
}

/* stablehlo.while(%iterArg = %x, ...) : T1, T2 attr-dict cond { } do { } */
static cm_status while_op(rd *r, opb *b)
{
    const char *names[64];
    uint32_t lens[64];
    uint32_t n = 0;
    if (expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (!eat(r, ')')) {
        do {
            if (n >= 64) {
                return fail(r, "too many while operands");
            }
            uint32_t v;
            lens[n] = ssa_name(r, &names[n]);
            if (lens[n] == 0 || expect(r, '=') != CM_OK || value_use(r, &v) != CM_OK ||
                u32_push(r, &r->ops, v) != CM_OK) {
                return r->st != CM_OK ? r->st : fail(r, "expected %%name = %%value");
            }
            n++;
        } while (eat(r, ','));
        if (expect(r, ')') != CM_OK) {
            return r->st;
        }
    }
    uint32_t tys[64];
    if (n > 0) {
        if (expect(r, ':') != CM_OK) {
            return r->st;
        }
        const char *at = r->p;
        for (uint32_t i = 0; i < n; i++) {
            if ((i > 0 && expect(r, ',') != CM_OK) || type(r, &tys[i]) != CM_OK) {
                return r->st;
            }
        }
        if (check_operand_types(r, b, tys, n, at) != CM_OK) {
            return r->st;
        }
    }
    kw(r, "attributes");
    if (opt_attr_dict(r) != CM_OK) {
        return r->st;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (u32_push(r, &r->types, tys[i]) != CM_OK) {
            return r->st;
        }
    }
    if (expect_kw(r, "cond") != CM_OK || parse_region(r, b, tys, names, lens, n) != CM_OK ||
        expect_kw(r, "do") != CM_OK || parse_region(r, b, tys, names, lens, n) != CM_OK) {
        return r->st;
    }
    return CM_OK;
}

/* arith.constant attr-dict VALUE: `dense<...> : T`, `0 : i32`, `1.0 : f32`, `true`. */
static cm_status arith_constant_op(rd *r, opb *b)
{
    (void)b;
    if (opt_attr_dict(r) != CM_OK) {
        return r->st;
    }
    ws(r);
    const char *at = r->p;
    sp_attr *v;
    if (attr_value(r, &v) != CM_OK) {
        return r->st;
    }
    const char *tname = NULL;
    uint32_t t = SP_NONE;
    if (v->kind == SP_ATTR_DENSE) {
        t = v->u.dense.type;
    } else if (v->kind == SP_ATTR_INT) {
        tname = v->u.i.type;
    } else if (v->kind == SP_ATTR_FLOAT) {
        tname = v->u.f.type;
    } else if (v->kind == SP_ATTR_BOOL) {
        tname = "i1";
    }
    if (t == SP_NONE && tname != NULL) {
        cm_error e;
        cm_error_clear(&e);
        cm_status st = sp_module_intern_type(r->m, tname, strlen(tname), &t, &e);
        if (st != CM_OK) {
            return st == CM_ENOMEM ? oom(r) : fail_at(r, at, "%s", e.msg);
        }
    }
    if (t == SP_NONE) {
        return fail_at(r, at, "expected a typed constant (dense<...> : T, 1 : i32, 1.0 : f32, true)");
    }
    if (attr_push(r, "value", v) != CM_OK) {
        return r->st;
    }
    return u32_push(r, &r->types, t);
}

/* tensor.cast %x attr-dict : T to U */
static cm_status cast_op(rd *r, opb *b)
{
    if (operand_list(r) != CM_OK || opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    ws(r);
    const char *at = r->p;
    uint32_t t, u;
    if (type(r, &t) != CM_OK || check_operand_types(r, b, &t, 1, at) != CM_OK ||
        expect_kw(r, "to") != CM_OK || type(r, &u) != CM_OK) {
        return r->st;
    }
    return u32_push(r, &r->types, u);
}

/* chlo.NAME %a[, %b] attr-dict : A[, B] -> R (the element-wise chlo ops), and
 * chlo.top_k(%a, k = K[, is_stable = B]) attr-dict : A -> (V, I). */
static cm_status chlo_op(rd *r, opb *b, sp_op_kind kind)
{
    if (kind == SP_OP_CHLO_TOP_K) {
        int64_t k;
        if (expect(r, '(') != CM_OK || operand_list(r) != CM_OK || expect(r, ',') != CM_OK ||
            expect_kw(r, "k") != CM_OK || expect(r, '=') != CM_OK || integer(r, &k) != CM_OK) {
            return r->st;
        }
        sp_attr *ka = int_attr(r, k, "i64");
        if (ka == NULL || attr_push(r, "k", ka) != CM_OK) {
            return r->st;
        }
        if (eat(r, ',')) {
            if (expect_kw(r, "is_stable") != CM_OK || expect(r, '=') != CM_OK) {
                return r->st;
            }
            bool v = kw(r, "true");
            if (!v && !kw(r, "false")) {
                return fail(r, "expected true or false");
            }
            sp_attr *sa = new_attr(r, SP_ATTR_BOOL);
            if (sa == NULL) {
                return r->st;
            }
            sa->u.b = v;
            if (attr_push(r, "is_stable", sa) != CM_OK) {
                return r->st;
            }
        }
        if (expect(r, ')') != CM_OK) {
            return r->st;
        }
    } else if (operand_list(r) != CM_OK) {
        return r->st;
    }
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    ws(r);
    const char *at = r->p;
    uint32_t t0 = r->types.n, n = 0;
    do {
        uint32_t t;
        if (type(r, &t) != CM_OK || u32_push(r, &r->types, t) != CM_OK) {
            return r->st;
        }
        n++;
    } while (eat(r, ','));
    if (check_operand_types(r, b, r->types.v + t0, n, at) != CM_OK) {
        return r->st;
    }
    r->types.n = t0;
    if (!eat_arrow(r)) {
        return fail(r, "expected '->' and the result type");
    }
    if (peek(r) == '(') {
        uint32_t cnt;
        return type_list_parens(r, &cnt);
    }
    uint32_t t;
    if (type(r, &t) != CM_OK) {
        return r->st;
    }
    return u32_push(r, &r->types, t);
}

/* chlo.scan(%in...) inits(%init...) dimension=D [attributes {...}] { ^bb0(...):
 * ... } : (Ts) -> (Rs), as ChloOps.cpp reads it: the operand and result
 * segment sizes are implied (results: the outputs, then one per init). */
static cm_status chlo_scan_op(rd *r, opb *b)
{
    const char *name_at = r->p - 9; /* "chlo.scan", where MLIR reports */
    if (expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (!eat(r, ')') && (operand_list(r) != CM_OK || expect(r, ')') != CM_OK)) {
        return r->st;
    }
    uint32_t n_in = n_operands(r, b);
    if (expect_kw(r, "inits") != CM_OK || expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (!eat(r, ')') && (operand_list(r) != CM_OK || expect(r, ')') != CM_OK)) {
        return r->st;
    }
    uint32_t n_init = n_operands(r, b) - n_in;
    int64_t dim;
    if (expect_kw(r, "dimension") != CM_OK || expect(r, '=') != CM_OK ||
        integer(r, &dim) != CM_OK) {
        return r->st;
    }
    if (dim < 0) {
        return fail(r, "chlo.scan: dimension must be non-negative");
    }
    sp_attr *da = int_attr(r, dim, "i64");
    if (da == NULL || attr_push(r, "dimension", da) != CM_OK) {
        return r->st;
    }
    if (kw(r, "attributes") && opt_attr_dict(r) != CM_OK) {
        return r->st;
    }
    if (parse_region(r, b, NULL, NULL, NULL, 0) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t n_res;
    if (functional_type(r, b, &n_res) != CM_OK) {
        return r->st;
    }
    if (n_res < n_init) {
        return fail_at(r, name_at,
                       "chlo.scan: not enough result types to cover the required carries");
    }
    int64_t seg_in[2] = {n_in, n_init}, seg_out[2] = {(int64_t)(n_res - n_init), n_init};
    sp_attr *so = darr_attr(r, seg_in, 2, "i32"), *sr = darr_attr(r, seg_out, 2, "i32");
    if (so == NULL || sr == NULL || attr_push(r, "operandSegmentSizes", so) != CM_OK ||
        attr_push(r, "resultSegmentSizes", sr) != CM_OK) {
        return r->st;
    }
    return CM_OK;
}

/* The operand type stablehlo.complex's short form implies for result type
 * t (tensor<..xcomplex<f32>> -> tensor<..xf32>), or SP_NONE. */
static uint32_t complex_part_type(rd *r, uint32_t t)
{
    const sp_type *ty = &r->m->types[t];
    if (ty->kind != SP_TYPE_TENSOR || ty->encoding != NULL ||
        (ty->elem != SP_ELEM_C64 && ty->elem != SP_ELEM_C128)) {
        return SP_NONE;
    }
    uint32_t id;
    if (sp_module_tensor_type(r->m, ty->elem == SP_ELEM_C64 ? SP_ELEM_F32 : SP_ELEM_F64, ty->dims,
                              ty->rank, &id, r->err) != CM_OK) {
        r->st = CM_ENOMEM;
        return SP_NONE;
    }
    return id;
}

/* stablehlo.complex %a, %b attr-dict : R (the result type; both operands
 * have its real counterpart), or : (A, B) -> R. */
static cm_status complex_op(rd *r, opb *b)
{
    if (operand_list(r) != CM_OK || opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    if (peek(r) == '(') {
        uint32_t nres;
        return functional_type(r, b, &nres);
    }
    ws(r);
    const char *at = r->p;
    uint32_t t;
    if (type(r, &t) != CM_OK) {
        return r->st;
    }
    uint32_t part = complex_part_type(r, t);
    if (r->st != CM_OK) {
        return r->st;
    }
    if (part == SP_NONE) {
        return fail_at(r, at, "'stablehlo.complex' needs a tensor of complex<f32> or complex<f64> "
                              "after ':' (or `(A, B) -> R`)");
    }
    uint32_t tys[2] = {part, part};
    if (n_operands(r, b) != 2) {
        return fail_at(r, at, "'stablehlo.complex' takes 2 operands");
    }
    if (check_operand_types(r, b, tys, 2, at) != CM_OK) {
        return r->st;
    }
    return u32_push(r, &r->types, t);
}

/* The check and interpreter dialects' ops in their custom forms
 * (sp_test_form, sp_mlir_int.h). */
static cm_status test_dialect_op(rd *r, opb *b, const sp_test_form *f)
{
    for (uint32_t i = 0; i < f->n_operands; i++) {
        uint32_t v;
        if ((i > 0 && expect(r, ',') != CM_OK) || value_use(r, &v) != CM_OK ||
            u32_push(r, &r->ops, v) != CM_OK) {
            return r->st;
        }
    }
    if (f->value) {
        ws(r);
        const char *at;
        sp_attr *v;
        if (expect(r, ',') != CM_OK) {
            return r->st;
        }
        ws(r);
        at = r->p;
        if (attr_value(r, &v) != CM_OK) {
            return r->st;
        }
        if (v->kind != SP_ATTR_DENSE) {
            return fail_at(r, at, "'%s' expects a constant `dense<...> : type`", b->name);
        }
        if (attr_push(r, "value", v) != CM_OK) {
            return r->st;
        }
    }
    for (int k = 0; k < 2 && f->args[k].key != NULL; k++) {
        const sp_test_kwarg *ka = &f->args[k];
        const char *save = r->p;
        uint32_t line = r->line;
        const char *ls = r->line_start;
        if (ka->optional && !(eat(r, ',') && kw(r, ka->key))) {
            r->p = save;
            r->line = line;
            r->line_start = ls;
            continue;
        }
        if (!ka->optional &&
            (expect(r, ',') != CM_OK || expect_kw(r, ka->key) != CM_OK)) {
            return r->st;
        }
        if (expect(r, '=') != CM_OK) {
            return r->st;
        }
        sp_attr *a = NULL;
        if (ka->kind == 's') {
            a = new_attr(r, SP_ATTR_STRING);
            if (a == NULL || string_lit(r, &a->u.str.s, &a->u.str.len) != CM_OK) {
                return r->st;
            }
        } else if (ka->kind == 'i') {
            int64_t v;
            if (integer(r, &v) != CM_OK) {
                return r->st;
            }
            if (v < 0) {
                return fail(r, "'%s' must not be negative", ka->key);
            }
            a = int_attr(r, v, ka->type);
        } else {
            ws(r);
            const char *at = r->p;
            if (number_attr(r, &a) != CM_OK) {
                return r->st;
            }
            if (a->kind == SP_ATTR_INT && a->u.i.type == NULL) {
                int64_t iv = a->u.i.v;
                a->kind = SP_ATTR_FLOAT;
                a->u.f.v = (double)iv;
                a->u.f.lit = NULL;
            } else if (a->kind != SP_ATTR_FLOAT) {
                return fail_at(r, at, "'%s' expects a float", ka->key);
            }
            a->u.f.type = ka->type;
        }
        if (a == NULL || attr_push(r, ka->attr, a) != CM_OK) {
            return r->st;
        }
    }
    if (!f->dict_after_colon && opt_attr_dict(r) != CM_OK) {
        return r->st;
    }
    if (f->n_types > 0) {
        if (expect(r, ':') != CM_OK || (f->dict_after_colon && opt_attr_dict(r) != CM_OK)) {
            return r->st;
        }
        ws(r);
        const char *at = r->p;
        uint32_t tys[2];
        for (uint32_t i = 0; i < f->n_types && i < 2; i++) {
            if ((i > 0 && expect(r, ',') != CM_OK) || type(r, &tys[i]) != CM_OK) {
                return r->st;
            }
        }
        /* one type names every operand's */
        uint32_t all[2] = {tys[0], f->n_types > 1 ? tys[1] : tys[0]};
        if (check_operand_types(r, b, all, f->n_operands, at) != CM_OK) {
            return r->st;
        }
    }
    if (f->result) {
        return u32_push(r, &r->types, r->m->values[r->ops.v[b->ops0]].type);
    }
    return CM_OK;
}

/* stablehlo.tuple %a, %b attr-dict : tuple<A, B> */
static cm_status tuple_op(rd *r, opb *b)
{
    if (operand_list(r) != CM_OK || opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    ws(r);
    const char *at = r->p;
    if (peek(r) == '(') {
        uint32_t k;
        return functional_type(r, b, &k);
    }
    uint32_t t;
    if (type(r, &t) != CM_OK) {
        return r->st;
    }
    /* the tuple type must list the operand types */
    cm_buf want;
    cm_buf_init(&want);
    cm_buf_puts(&want, "tuple<");
    for (uint32_t i = 0; i < n_operands(r, b); i++) {
        cm_buf_puts(&want, i > 0 ? ", " : "");
        cm_buf_puts(&want, r->m->types[r->m->values[r->ops.v[b->ops0 + i]].type].text);
    }
    cm_buf_putc(&want, '>');
    bool ok = !want.oom && strcmp(want.data, r->m->types[t].text) == 0;
    bool oomed = want.oom;
    cm_buf_fini(&want);
    if (oomed) {
        return oom(r);
    }
    if (!ok) {
        return fail_at(r, at, "the operand types of 'stablehlo.tuple' do not match %s",
                       r->m->types[t].text);
    }
    return u32_push(r, &r->types, t);
}

/* stablehlo.get_tuple_element %t[0] attr-dict : (tuple<...>) -> T */
static cm_status get_tuple_element_op(rd *r, opb *b)
{
    uint32_t v;
    int64_t idx;
    if (value_use(r, &v) != CM_OK || u32_push(r, &r->ops, v) != CM_OK || expect(r, '[') != CM_OK) {
        return r->st;
    }
    const char *at = r->p;
    if (integer(r, &idx) != CM_OK || expect(r, ']') != CM_OK) {
        return r->st;
    }
    if (idx < 0 || idx > INT32_MAX) {
        return fail_at(r, at, "tuple index out of range");
    }
    if (attr_push(r, "index", int_attr(r, idx, "i32")) != CM_OK || opt_attr_dict(r) != CM_OK ||
        expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t k;
    return functional_type(r, b, &k);
}

/* stablehlo.composite "name" %a, %b attr-dict : (Ts) -> Rs */
static cm_status composite_op(rd *r, opb *b)
{
    sp_attr *n = new_attr(r, SP_ATTR_STRING);
    if (n == NULL || string_lit(r, &n->u.str.s, &n->u.str.len) != CM_OK ||
        attr_push(r, "name", n) != CM_OK || operand_list(r) != CM_OK ||
        opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t k;
    return functional_type(r, b, &k);
}

/* ---- sdy ops ----------------------------------------------------------------------- */

static cm_status sharding_operand(rd *r, const char *attr_name)
{
    sp_attr *a = new_attr(r, SP_ATTR_SHARDING);
    if (a == NULL || sdy_codec(r, 0, (void **)&a->u.sharding) != CM_OK) {
        return r->st;
    }
    return attr_push(r, attr_name, a);
}

/* `: T` where operand 0 and the result share T. */
static cm_status same_type_tail(rd *r, opb *b)
{
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    const char *at = r->p;
    uint32_t t;
    if (type(r, &t) != CM_OK) {
        return r->st;
    }
    uint32_t tys[1] = {t};
    if (n_operands(r, b) > 0 && check_operand_types(r, b, tys, 1, at) != CM_OK) {
        return r->st;
    }
    return u32_push(r, &r->types, t);
}

/* sdy collectives: `sdy.all_gather [{"x"}, {}] %v out_sharding=<...> : T` and
 * kin; all_reduce / reduce_scatter may start with a reduction op `<max>`. */
static cm_status collective_op(rd *r, opb *b, sp_op_kind kind)
{
    if (kind == SP_OP_SDY_ALL_REDUCE || kind == SP_OP_SDY_REDUCE_SCATTER) {
        bool angled = eat(r, '<');
        const char *w;
        uint32_t wn = 0;
        if (angled || peek_kw(r, "sum") || peek_kw(r, "max") || peek_kw(r, "min")) {
            wn = ident(r, &w);
            if (wn == 0 || (angled && expect(r, '>') != CM_OK)) {
                return r->st != CM_OK ? r->st : fail(r, "expected a reduction op (sum, max, min)");
            }
            sp_attr *e = new_attr(r, SP_ATTR_ENUM);
            if (e == NULL) {
                return r->st;
            }
            e->u.enm.dialect = "sdy";
            e->u.enm.kind = "reduction_op";
            e->u.enm.value = astr(r, w, wn);
            if (attr_push(r, "reduction_op", e) != CM_OK) {
                return r->st;
            }
        }
    }
    const char *name = NULL;
    sp_attr *axes = NULL;
    cm_status st = CM_OK;
    switch (kind) {
    case SP_OP_SDY_ALL_GATHER:
        name = "gathering_axes";
        st = axis_lists_attr(r, false, &axes);
        break;
    case SP_OP_SDY_ALL_SLICE:
        name = "slicing_axes";
        st = axis_lists_attr(r, false, &axes);
        break;
    case SP_OP_SDY_REDUCE_SCATTER:
        name = "reduce_scatter_axes";
        st = axis_lists_attr(r, false, &axes);
        break;
    case SP_OP_SDY_SHARDED_TO_UNREDUCED:
        name = "axes";
        st = axis_lists_attr(r, false, &axes);
        break;
    case SP_OP_SDY_ALL_REDUCE:
        name = "reduction_axes";
        st = axis_list_attr(r, &axes);
        break;
    case SP_OP_SDY_REPLICATED_TO_UNREDUCED:
        name = "axes";
        st = axis_list_attr(r, &axes);
        break;
    case SP_OP_SDY_ALL_TO_ALL:
        name = "params";
        st = axis_lists_attr(r, true, &axes);
        break;
    default:
        break;
    }
    if (st != CM_OK || (name != NULL && attr_push(r, name, axes) != CM_OK)) {
        return r->st;
    }
    uint32_t v;
    if (value_use(r, &v) != CM_OK || u32_push(r, &r->ops, v) != CM_OK ||
        expect_kw(r, "out_sharding") != CM_OK || expect(r, '=') != CM_OK ||
        sharding_operand(r, "out_sharding") != CM_OK) {
        return r->st;
    }
    return same_type_tail(r, b);
}

/* Block arguments `(%a: T [loc(...)], ...)` of a custom-form region, into
 * growable heap arrays (*names, *lens, *tys) that the caller frees. */
typedef struct arglist {
    const char **names;
    uint32_t *lens;
    uint32_t *tys;
    uint32_t n, cap;
} arglist;

static void arglist_fini(arglist *a)
{
    cm_free(a->names);
    cm_free(a->lens);
    cm_free(a->tys);
}

static cm_status region_args(rd *r, arglist *a)
{
    if (expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (eat(r, ')')) {
        return CM_OK;
    }
    do {
        if (a->n == a->cap) {
            uint32_t c1 = a->cap, c2 = a->cap, c3 = a->cap;
            if (CM_GROW_U32(a->names, c1, a->n + 1, NULL) != CM_OK ||
                CM_GROW_U32(a->lens, c2, a->n + 1, NULL) != CM_OK ||
                CM_GROW_U32(a->tys, c3, a->n + 1, NULL) != CM_OK) {
                return oom(r);
            }
            a->cap = c1;
        }
        a->lens[a->n] = ssa_name(r, &a->names[a->n]);
        if (a->lens[a->n] == 0) {
            return fail(r, "expected a block argument (%%name: type)");
        }
        if (expect(r, ':') != CM_OK || type(r, &a->tys[a->n]) != CM_OK) {
            return r->st;
        }
        if (peek_kw(r, "loc") && loc_clause(r, NULL, NULL) != CM_OK) {
            return r->st;
        }
        a->n++;
    } while (eat(r, ','));
    return expect(r, ')');
}

/* sdy.manual_computation(%a) in_shardings=[...] out_shardings=[...]
 *   manual_axes={"x"} (%arg1: T) { ... } attr-dict : (Ts) -> Rs
 * sdy.named_computation<"name">(%a) [in_shardings=[...]] [out_shardings=[...]]
 *   (%arg1: T) { ... } attr-dict : (Ts) -> Rs */
static cm_status sdy_region_op(rd *r, opb *b, sp_op_kind kind)
{
    bool named = kind == SP_OP_SDY_NAMED_COMPUTATION;
    if (named) {
        sp_attr *n = new_attr(r, SP_ATTR_STRING);
        if (n == NULL || expect(r, '<') != CM_OK || string_lit(r, &n->u.str.s, &n->u.str.len) != CM_OK ||
            expect(r, '>') != CM_OK || attr_push(r, "name", n) != CM_OK) {
            return r->st;
        }
    }
    if (expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (!eat(r, ')') && (operand_list(r) != CM_OK || expect(r, ')') != CM_OK)) {
        return r->st;
    }
    static const char *const keys[2] = {"in_shardings", "out_shardings"};
    for (int i = 0; i < 2; i++) {
        if (kw(r, keys[i])) {
            sp_attr *a;
            if (expect(r, '=') != CM_OK || sharding_items(r, false, &a) != CM_OK ||
                attr_push(r, keys[i], a) != CM_OK) {
                return r->st;
            }
        } else if (!named) {
            return fail(r, "expected '%s='", keys[i]);
        }
    }
    if (!named) {
        sp_attr *a;
        if (expect_kw(r, "manual_axes") != CM_OK || expect(r, '=') != CM_OK ||
            axis_list_attr(r, &a) != CM_OK || attr_push(r, "manual_axes", a) != CM_OK) {
            return r->st;
        }
    }
    arglist args = {NULL, NULL, NULL, 0, 0};
    if (region_args(r, &args) == CM_OK) {
        parse_region(r, b, args.tys, args.names, args.lens, args.n);
    }
    arglist_fini(&args);
    if (r->st != CM_OK || opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t k;
    return functional_type(r, b, &k);
}

static cm_status sdy_op(rd *r, opb *b, sp_op_kind kind)
{
    switch (kind) {
    case SP_OP_SDY_SHARDING_CONSTRAINT:
    case SP_OP_SDY_RESHARD:
        if (operand_list(r) != CM_OK || sharding_operand(r, "sharding") != CM_OK) {
            return r->st;
        }
        return same_type_tail(r, b);
    case SP_OP_SDY_PROPAGATION_BARRIER: {
        if (operand_list(r) != CM_OK || expect_kw(r, "allowed_direction") != CM_OK ||
            expect(r, '=') != CM_OK) {
            return r->st;
        }
        sp_attr *d;
        if (enum_attr(r, "propagation_direction", &d) != CM_OK) {
            return r->st;
        }
        d->u.enm.dialect = "sdy";
        if (attr_push(r, "allowed_direction", d) != CM_OK) {
            return r->st;
        }
        return same_type_tail(r, b);
    }
    case SP_OP_SDY_SHARDING_GROUP: {
        int64_t id;
        if (operand_list(r) != CM_OK || expect_kw(r, "group_id") != CM_OK ||
            expect(r, '=') != CM_OK || integer(r, &id) != CM_OK ||
            attr_push(r, "group_id", int_attr(r, id, "i64")) != CM_OK) {
            return r->st;
        }
        if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
            return r->st;
        }
        const char *at = r->p;
        uint32_t t;
        if (type(r, &t) != CM_OK) {
            return r->st;
        }
        uint32_t tys[1] = {t};
        return check_operand_types(r, b, tys, 1, at);
    }
    case SP_OP_SDY_CONSTANT:
        return constant_op(r, b);
    case SP_OP_SDY_ALL_GATHER:
    case SP_OP_SDY_ALL_SLICE:
    case SP_OP_SDY_ALL_REDUCE:
    case SP_OP_SDY_ALL_TO_ALL:
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
    case SP_OP_SDY_REDUCE_SCATTER:
    case SP_OP_SDY_REPLICATED_TO_UNREDUCED:
    case SP_OP_SDY_SHARDED_TO_UNREDUCED:
        return collective_op(r, b, kind);
    case SP_OP_SDY_DATA_FLOW_EDGE:
        if (operand_list(r) != CM_OK) {
            return r->st;
        }
        if (kw(r, "sharding") &&
            (expect(r, '=') != CM_OK || sharding_operand(r, "sharding") != CM_OK)) {
            return r->st;
        }
        return same_type_tail(r, b);
    case SP_OP_SDY_FUNC_DATA_FLOW_EDGE:
        if (operand_list(r) != CM_OK) {
            return r->st;
        }
        return same_type_tail(r, b);
    case SP_OP_SDY_MANUAL_COMPUTATION:
    case SP_OP_SDY_NAMED_COMPUTATION:
        return sdy_region_op(r, b, kind);
    default:
        return fail(r, "the custom form of '%s' is not supported; write it in the generic form",
                    b->name);
    }
}

/* sdy.mesh @name = <...> (or = #sdy.mesh<...>) */
static cm_status mesh_op(rd *r, opb *b)
{
    const char *s;
    uint32_t n;
    if (bare_symbol(r, "mesh", &s, &n) != CM_OK) {
        return r->st;
    }
    sp_attr *name = new_attr(r, SP_ATTR_STRING);
    if (name == NULL) {
        return r->st;
    }
    name->u.str.s = astr(r, s, n);
    name->u.str.len = n;
    if (attr_push(r, "sym_name", name) != CM_OK || expect(r, '=') != CM_OK) {
        return r->st;
    }
    /* MLIR also reads the attribute spelled out: `= #sdy.mesh<...>` */
    ws(r);
    if (r->end - r->p >= 9 && memcmp(r->p, "#sdy.mesh", 9) == 0) {
        r->p += 9;
    }
    sp_attr *mesh = new_attr(r, SP_ATTR_MESH);
    if (mesh == NULL || sdy_codec(r, 1, (void **)&mesh->u.mesh) != CM_OK ||
        attr_push(r, "mesh", mesh) != CM_OK) {
        return r->st;
    }
    (void)b;
    return opt_attr_dict(r);
}

/* ---- func ops ------------------------------------------------------------------------ */

static sp_attr *dict_from_stack(rd *r, uint32_t n)
{
    sp_attr *a = new_attr(r, SP_ATTR_DICT);
    if (a == NULL) {
        return NULL;
    }
    a->u.dict.n = n;
    a->u.dict.items = pop_attrs(r, n);
    return a;
}

/* func.func [visibility] @name(%arg: T {attrs}, ...) [-> (T {attrs}, ...)] [attributes {..}] {..} */
static cm_status func_op(rd *r, opb *b)
{
    const char *vis = NULL;
    if (kw(r, "private")) {
        vis = "private";
    } else if (kw(r, "public")) {
        vis = "public";
    } else if (kw(r, "nested")) {
        vis = "nested";
    }
    sp_attr *name;
    if (symbol_attr(r, "function", &name) != CM_OK) {
        return r->st;
    }
    enum { MAXA = 1 << 16 };
    const char **arg_locs = NULL; /* heap; per argument, NULL where it has no loc */
    const sp_loc **arg_where = NULL; /* heap; alongside arg_locs */
    const char **names = cm_alloc(sizeof(char *) * MAXA);
    uint32_t *lens = cm_alloc(sizeof(uint32_t) * MAXA * 2);
    sp_attr **arg_dicts = cm_alloc(sizeof(sp_attr *) * MAXA * 2);
    cm_status st = CM_OK;
    if (names == NULL || lens == NULL || arg_dicts == NULL) {
        st = oom(r);
        goto out;
    }
    uint32_t *tys = lens + MAXA;
    sp_attr **res_dicts = arg_dicts + MAXA;
    uint32_t na = 0, nr = 0;
    bool any_arg_attr = false, any_res_attr = false, unnamed = false;
    if (expect(r, '(') != CM_OK) {
        goto fail;
    }
    if (!eat(r, ')')) {
        do {
            if (na >= MAXA) {
                fail(r, "too many function arguments (max %d)", MAXA);
                goto fail;
            }
            /* `%a: T` in a definition; a declaration may list bare types */
            names[na] = NULL;
            lens[na] = peek(r) == '%' ? ssa_name(r, &names[na]) : 0;
            if (lens[na] == 0 && peek(r) == '%') {
                fail(r, "expected an argument name");
                goto fail;
            }
            if (lens[na] == 0) {
                unnamed = true;
                if (type(r, &tys[na]) != CM_OK) {
                    goto fail;
                }
            } else if (expect(r, ':') != CM_OK || type(r, &tys[na]) != CM_OK) {
                goto fail;
            }
            arg_dicts[na] = NULL;
            if (peek(r) == '{') {
                uint32_t k;
                if (attr_dict_entries(r, &k) != CM_OK) {
                    goto fail;
                }
                arg_dicts[na] = dict_from_stack(r, k);
                any_arg_attr = true;
            }
            if (peek_kw(r, "loc")) {
                if (arg_locs == NULL) { /* the arguments so far have none */
                    arg_locs = cm_alloc(sizeof(char *) * MAXA);
                    arg_where = cm_alloc(sizeof(sp_loc *) * MAXA);
                    if (arg_locs == NULL || arg_where == NULL) {
                        oom(r);
                        goto fail;
                    }
                    memset(arg_locs, 0, sizeof(char *) * na);
                    memset(arg_where, 0, sizeof(sp_loc *) * na);
                }
                sp_loc *w;
                if (loc_clause(r, &arg_locs[na], &w) != CM_OK) {
                    goto fail;
                }
                arg_where[na] = w;
            } else if (arg_locs != NULL) {
                arg_locs[na] = NULL;
                arg_where[na] = NULL;
            }
            na++;
        } while (eat(r, ','));
        if (expect(r, ')') != CM_OK) {
            goto fail;
        }
    }
    if (eat_arrow(r)) {
        bool paren = peek(r) == '(';
        if (paren) {
            r->p++;
        }
        if (!(paren && eat(r, ')'))) {
            do {
                if (nr >= MAXA) {
                    fail(r, "too many function results");
                    goto fail;
                }
                uint32_t t;
                if (type(r, &t) != CM_OK) {
                    goto fail;
                }
                res_dicts[nr] = NULL;
                if (paren && peek(r) == '{') {
                    uint32_t k;
                    if (attr_dict_entries(r, &k) != CM_OK) {
                        goto fail;
                    }
                    res_dicts[nr] = dict_from_stack(r, k);
                    any_res_attr = true;
                }
                /* result types go after the arg types in tys */
                if (u32_push(r, &r->types, t) != CM_OK) {
                    goto fail;
                }
                nr++;
            } while (paren && eat(r, ','));
            if (paren && expect(r, ')') != CM_OK) {
                goto fail;
            }
        }
    }
    /* function_type attr */
    {
        cm_buf fb;
        cm_buf_init(&fb);
        cm_buf_putc(&fb, '(');
        for (uint32_t i = 0; i < na; i++) {
            cm_buf_puts(&fb, i ? ", " : "");
            cm_buf_puts(&fb, r->m->types[tys[i]].text);
        }
        cm_buf_puts(&fb, ") -> (");
        for (uint32_t i = 0; i < nr; i++) {
            cm_buf_puts(&fb, i ? ", " : "");
            cm_buf_puts(&fb, r->m->types[r->types.v[r->types.n - nr + i]].text);
        }
        cm_buf_putc(&fb, ')');
        sp_attr *ft = new_attr(r, SP_ATTR_TYPE);
        cm_error e;
        cm_error_clear(&e);
        if (fb.oom || ft == NULL ||
            sp_module_intern_type(r->m, fb.data, fb.len, &ft->u.type, &e) != CM_OK) {
            cm_buf_fini(&fb);
            oom(r);
            goto fail;
        }
        cm_buf_fini(&fb);
        r->types.n -= nr; /* func.func itself has no results */
        if (attr_push(r, "sym_name", name) != CM_OK || attr_push(r, "function_type", ft) != CM_OK) {
            goto fail;
        }
    }
    if (vis != NULL) {
        sp_attr *v = new_attr(r, SP_ATTR_STRING);
        if (v == NULL) {
            goto fail;
        }
        v->u.str.s = vis;
        v->u.str.len = strlen(vis);
        if (attr_push(r, "sym_visibility", v) != CM_OK) {
            goto fail;
        }
    }
    if (any_arg_attr || any_res_attr) {
        for (int which = 0; which < 2; which++) {
            uint32_t cnt = which == 0 ? na : nr;
            sp_attr **dicts = which == 0 ? arg_dicts : res_dicts;
            if ((which == 0 && !any_arg_attr) || (which == 1 && !any_res_attr)) {
                continue;
            }
            sp_attr *arr = new_attr(r, SP_ATTR_ARRAY);
            if (arr == NULL) {
                goto fail;
            }
            arr->u.arr.n = cnt;
            arr->u.arr.items = cm_arena_alloc(&r->m->arena, sizeof(sp_attr *) * (cnt + 1u));
            if (arr->u.arr.items == NULL) {
                oom(r);
                goto fail;
            }
            for (uint32_t i = 0; i < cnt; i++) {
                if (dicts[i] == NULL) {
                    dicts[i] = new_attr(r, SP_ATTR_DICT);
                    if (dicts[i] == NULL) {
                        goto fail;
                    }
                }
                arr->u.arr.items[i] = dicts[i];
            }
            if (attr_push(r, which == 0 ? "arg_attrs" : "res_attrs", arr) != CM_OK) {
                goto fail;
            }
        }
    }
    if (kw(r, "attributes")) {
        uint32_t k;
        if (attr_dict_entries(r, &k) != CM_OK) {
            goto fail;
        }
    }
    if (peek(r) == '{') {
        if (unnamed && na > 0) {
            fail(r, "a function with a body needs named arguments (%%arg0: type)");
            goto fail;
        }
        r->func_arg_locs = NULL;
        r->func_arg_where = NULL;
        if (arg_locs != NULL) { /* kept in the arena, one per argument */
            r->func_arg_locs = cm_arena_alloc(&r->m->arena, sizeof(char *) * (na + 1u));
            r->func_arg_where = cm_arena_alloc(&r->m->arena, sizeof(sp_loc *) * (na + 1u));
            if (r->func_arg_locs == NULL || r->func_arg_where == NULL) {
                oom(r);
                goto fail;
            }
            memcpy(r->func_arg_locs, arg_locs, sizeof(char *) * na);
            memcpy(r->func_arg_where, arg_where, sizeof(sp_loc *) * na);
        }
        if (parse_region(r, b, tys, names, lens, na) != CM_OK) {
            goto fail;
        }
    }
    goto out;
fail:
    st = r->st;
out:
    cm_free(names);
    cm_free(lens);
    cm_free(arg_dicts);
    cm_free(arg_locs);
    cm_free(arg_where);
    return st != CM_OK ? st : r->st;
}

/* func.call @f(%a) : (Ts) -> Rs */
static cm_status call_op(rd *r, opb *b)
{
    const char *s;
    uint32_t n;
    if (bare_symbol(r, "callee", &s, &n) != CM_OK) {
        return r->st;
    }
    sp_attr *c = new_attr(r, SP_ATTR_SYMBOL);
    if (c == NULL) {
        return r->st;
    }
    c->u.sym = astr(r, s, n);
    if (attr_push(r, "callee", c) != CM_OK || expect(r, '(') != CM_OK) {
        return r->st;
    }
    if (!eat(r, ')') && (operand_list(r) != CM_OK || expect(r, ')') != CM_OK)) {
        return r->st;
    }
    if (opt_attr_dict(r) != CM_OK || expect(r, ':') != CM_OK) {
        return r->st;
    }
    uint32_t k;
    return functional_type(r, b, &k);
}

/* ---- regions, blocks, ops ---------------------------------------------------------- */

/* A top-level alias definition `#name = attribute` or `!name = type`.
 * Attribute aliases are kept (with their text, whitespace-normalised) and
 * printed back; a use as a whole attribute value reads as the value. Type
 * aliases are substituted where they are used. */
static cm_status alias_def(rd *r)
{
    const char *at = r->p;
    char sigil = *r->p++;
    const char *s;
    uint32_t n = 0;
    if (r->p < r->end && is_id_start(*r->p)) {
        n = ident(r, &s);
    }
    if (n == 0) {
        return fail_at(r, at, "expected an alias name after '%c'", sigil);
    }
    for (uint32_t i = 0; sigil == '#' && i < r->n_aliases; i++) {
        if (strlen(r->aliases[i].name) == n && memcmp(r->aliases[i].name, s, n) == 0) {
            return fail_at(r, at, "redefinition of alias '#%.*s'", (int)n, s);
        }
    }
    for (uint32_t i = 0; sigil == '!' && i < r->n_type_aliases; i++) {
        if (r->type_aliases[i].len == n && memcmp(r->type_aliases[i].name, s, n) == 0) {
            return fail_at(r, at, "redefinition of alias '!%.*s'", (int)n, s);
        }
    }
    if (expect(r, '=') != CM_OK) {
        return r->st;
    }
    if (sigil == '!') {
        uint32_t t;
        if (type(r, &t) != CM_OK) {
            return r->st;
        }
        if (CM_GROW_U32(r->type_aliases, r->cap_type_aliases, r->n_type_aliases + 1, NULL) !=
            CM_OK) {
            return oom(r);
        }
        r->type_aliases[r->n_type_aliases++] = (type_alias){s, n, t};
        return CM_OK;
    }
    ws(r);
    const char *v0 = r->p;
    sp_attr *v;
    if (peek_kw(r, "loc")) {
        /* `#loc1 = loc("file":1:2)`: kept verbatim, and read for the
         * locations that refer to it */
        sp_loc *l;
        if (loc_clause(r, NULL, &l) != CM_OK) {
            return r->st;
        }
        if (CM_GROW_U32(r->loc_aliases, r->cap_loc_aliases, r->n_loc_aliases + 1, NULL) !=
            CM_OK) {
            return oom(r);
        }
        r->loc_aliases[r->n_loc_aliases++] = (loc_alias){astr(r, s, n), l};
        v = new_attr(r, SP_ATTR_OPAQUE);
        if (v == NULL) {
            return r->st;
        }
        v->u.opaque.text = astr(r, v0, (size_t)(r->p - v0));
    } else if (attr_value(r, &v) != CM_OK) {
        return r->st;
    }
    /* the text with each run of whitespace (outside strings) made one space */
    size_t len = (size_t)(r->p - v0);
    char *text = cm_arena_alloc(&r->m->arena, len + 1);
    if (text == NULL) {
        return oom(r);
    }
    size_t o = 0;
    bool in_str = false;
    for (const char *q = v0; q < r->p; q++) {
        char c = *q;
        if (in_str) {
            text[o++] = c;
            if (c == '\\' && q + 1 < r->p) {
                text[o++] = *++q;
            } else if (c == '"') {
                in_str = false;
            }
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            if (o > 0 && text[o - 1] != ' ') {
                text[o++] = ' ';
            }
        } else {
            in_str = c == '"';
            text[o++] = c;
        }
    }
    text[o] = '\0';
    if (CM_GROW_U32(r->aliases, r->cap_aliases, r->n_aliases + 1, NULL) != CM_OK) {
        return oom(r);
    }
    sp_alias *al = &r->aliases[r->n_aliases++];
    al->name = astr(r, s, n);
    al->text = text;
    al->value = v;
    return r->st;
}

static bool at_alias_def(rd *r)
{
    int c = peek(r);
    return (c == '#' || c == '!') && r->p + 1 < r->end && is_id_start(r->p[1]);
}

static cm_status parse_block_body(rd *r, uint32_t blk)
{
    for (;;) {
        int c = peek(r);
        if (c == '}' || c == '^' || c < 0) {
            return CM_OK;
        }
        if (blk == r->m->body && at_alias_def(r)) {
            if (alias_def(r) != CM_OK) {
                return r->st;
            }
            continue;
        }
        if (parse_op(r, blk) != CM_OK) {
            return r->st;
        }
    }
}

/* `{ [^bb0(%a: T, ...):] ops... [^bb1...] }` appended as a new region of b.
 * When arg_types is given the entry block gets those named arguments (func,
 * reduce, while); a labelled entry block declares its own. */
static cm_status parse_region(rd *r, opb *b, const uint32_t *arg_types, const char *const *arg_names,
                              const uint32_t *arg_name_lens, uint32_t n_args)
{
    if (b->n_regions >= 16) {
        return fail(r, "too many regions");
    }
    if (++r->depth > MAX_DEPTH) {
        return fail(r, "regions nested too deeply");
    }
    if (expect(r, '{') != CM_OK || push_scope(r) != CM_OK) {
        return r->st;
    }
    uint32_t nblocks = 0;
    bool first = true;
    for (;;) {
        int c = peek(r);
        if (c == '}' && nblocks == 0 && arg_types != NULL && n_args > 0) {
            /* `{}` with declared arguments: MLIR still makes the entry block */
            c = 0;
        } else if (c == '}') {
            r->p++;
            break;
        }
        if (c < 0) {
            return fail(r, "unterminated region: expected '}'");
        }
        uint32_t blk;
        if (sp_module_new_block(r->m, SP_NONE, &blk) != CM_OK) {
            return oom(r);
        }
        if (c == '^') {
            r->p++;
            const char *s;
            uint32_t n = ident(r, &s);
            if (n == 0) {
                while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
                    r->p++;
                }
                s = r->p;
            }
            r->m->blocks[blk].label = astr(r, s, n);
            if (eat(r, '(')) {
                if (!eat(r, ')')) {
                    /* argument locations, kept once one has one (arena, grown by doubling) */
                    const char **lt = NULL;
                    const sp_loc **lw = NULL;
                    uint32_t cap_lt = 0, cap_lw = 0;
                    do {
                        const char *an;
                        uint32_t al = ssa_name(r, &an);
                        uint32_t t, v;
                        if (al == 0 || expect(r, ':') != CM_OK || type(r, &t) != CM_OK) {
                            return r->st != CM_OK ? r->st : fail(r, "expected a block argument");
                        }
                        uint32_t ai = r->m->blocks[blk].n_args;
                        if (peek_kw(r, "loc")) {
                            const char *text;
                            sp_loc *w;
                            if (loc_clause(r, &text, &w) != CM_OK) {
                                return r->st;
                            }
                            if (lt == NULL) {
                                cap_lt = cap_lw = ai + 8u;
                                lt = cm_arena_zalloc(&r->m->arena, sizeof(char *) * cap_lt);
                                lw = cm_arena_zalloc(&r->m->arena, sizeof(sp_loc *) * cap_lw);
                                if (lt == NULL || lw == NULL) {
                                    return oom(r);
                                }
                            }
                            while (ai >= cap_lt) {
                                uint32_t c0 = cap_lt;
                                const char **g = arena_double(&r->m->arena, lt, &cap_lt, c0,
                                                              sizeof *lt);
                                const sp_loc **h = arena_double(&r->m->arena, lw, &cap_lw, c0,
                                                                sizeof *lw);
                                if (g == NULL || h == NULL) {
                                    return oom(r);
                                }
                                memset(g + c0, 0, sizeof *g * (cap_lt - c0));
                                memset(h + c0, 0, sizeof *h * (cap_lw - c0));
                                lt = g;
                                lw = h;
                            }
                            lt[ai] = text;
                            lw[ai] = w;
                            r->m->blocks[blk].arg_locs = lt;
                            r->m->blocks[blk].arg_where = lw;
                        }
                        if (sp_module_add_block_arg(r->m, blk, t, &v) != CM_OK) {
                            return oom(r);
                        }
                        if (define_name(r, an, al, v, 1) != CM_OK) {
                            return r->st;
                        }
                    } while (eat(r, ','));
                    if (expect(r, ')') != CM_OK) {
                        return r->st;
                    }
                }
            }
            if (expect(r, ':') != CM_OK) {
                return r->st;
            }
        } else if (first && arg_types != NULL) {
            r->m->blocks[blk].arg_locs = r->func_arg_locs;
            r->m->blocks[blk].arg_where = r->func_arg_where;
            r->func_arg_locs = NULL;
            r->func_arg_where = NULL;
            for (uint32_t i = 0; i < n_args; i++) {
                uint32_t v;
                if (sp_module_add_block_arg(r->m, blk, arg_types[i], &v) != CM_OK) {
                    return oom(r);
                }
                if (define_name(r, arg_names[i], arg_name_lens[i], v, 1) != CM_OK) {
                    return r->st;
                }
            }
        } else if (!first) {
            return fail(r, "expected a block label");
        }
        first = false;
        if (u32_push(r, &r->blocks, blk) != CM_OK) {
            return r->st;
        }
        nblocks++;
        if (parse_block_body(r, blk) != CM_OK) {
            return r->st;
        }
    }
    pop_scope(r);
    b->region_sizes[b->n_regions++] = nblocks;
    r->depth--;
    return CM_OK;
}

/* `return {attrs} %a, %b : A, B` (func.return and sdy.return read alike;
 * their attr-dict comes before the operands). */
static cm_status func_return_op(rd *r, opb *b)
{
    static const sp_pretty ret = {SP_OP_RETURN, SP_TY_LIST, {{0}}};
    if (peek(r) == '{' && opt_attr_dict(r) != CM_OK) {
        return r->st;
    }
    return keyword_op(r, b, &ret);
}

/* The readers of the custom forms the keyword table (sp_mlir_pretty) does
 * not describe, by op kind; sdy ops without an entry go to sdy_op. */
typedef cm_status custom_reader(rd *r, opb *b);
#define CUSTOM_READER_(kind, fn) [kind] = fn,
static custom_reader *const custom_readers[SP_OP_COUNT_] = {SP_MLIR_CUSTOM_FORMS(CUSTOM_READER_)};
#undef CUSTOM_READER_

static cm_status parse_op(rd *r, uint32_t block)
{
    ws(r);
    uint32_t line = r->line;
    uint32_t col = (uint32_t)(r->p - r->line_start) + 1;
    const char *rn[64];
    uint32_t rl[64], rc[64];
    uint32_t nrn = 0;
    if (peek(r) == '%') {
        do {
            if (nrn >= 64) {
                return fail(r, "too many result names");
            }
            rl[nrn] = ssa_name(r, &rn[nrn]);
            if (rl[nrn] == 0) {
                return fail(r, "expected a result name");
            }
            rc[nrn] = 1;
            if (r->p < r->end && *r->p == ':') {
                int64_t k;
                r->p++;
                if (integer(r, &k) != CM_OK) {
                    return r->st;
                }
                if (k < 1 || k > 65536) {
                    return fail(r, "bad result group size");
                }
                rc[nrn] = (uint32_t)k;
            }
            nrn++;
        } while (eat(r, ','));
        if (expect(r, '=') != CM_OK) {
            return r->st;
        }
    }
    opb b;
    if (peek(r) == '"') {
        const char *name;
        size_t n;
        if (string_lit(r, &name, &n) != CM_OK) {
            return r->st;
        }
        opb_begin(r, &b, name);
        if (generic_op(r, &b) != CM_OK) {
            return r->st;
        }
        return finish_op(r, &b, block, line, col, rn, rl, rc, nrn, NULL);
    }
    const char *s;
    uint32_t n = ident(r, &s);
    if (n == 0) {
        return fail(r, "expected an operation");
    }
    const char *name;
    sp_op_kind kind = sp_op_kind_of(s, n);
    if (kind == SP_OP_UNKNOWN && n == 6 && memcmp(s, "return", 6) == 0) {
        kind = SP_OP_FUNC_RETURN;
    } else if (kind == SP_OP_UNKNOWN && n == 4 && memcmp(s, "call", 4) == 0) {
        kind = SP_OP_FUNC_CALL;
    }
    if (kind == SP_OP_UNKNOWN) {
        /* ops of other dialects whose custom form the reference tests use */
        cm_status st;
        if (n == 14 && memcmp(s, "arith.constant", 14) == 0) {
            opb_begin(r, &b, "arith.constant");
            st = arith_constant_op(r, &b);
        } else if (n == 9 && memcmp(s, "chlo.scan", 9) == 0) {
            opb_begin(r, &b, "chlo.scan");
            st = chlo_scan_op(r, &b);
        } else if (n == 11 && memcmp(s, "tensor.cast", 11) == 0) {
            opb_begin(r, &b, "tensor.cast");
            st = cast_op(r, &b);
        } else if (sp_mlir_test_form(s, n) != NULL) {
            const sp_test_form *f = sp_mlir_test_form(s, n);
            opb_begin(r, &b, f->name);
            st = test_dialect_op(r, &b, f);
        } else {
            return fail_at(r, s,
                           "unknown operation '%.*s': its custom form is not supported; write "
                           "it in the generic form \"%.*s\"(...)",
                           (int)n, s, (int)n, s);
        }
        if (st != CM_OK) {
            return r->st;
        }
        return finish_op(r, &b, block, line, col, rn, rl, rc, nrn, NULL);
    }
    /* an MHLO op keeps its own name (its kind is its StableHLO twin's) */
    name = n > 5 && memcmp(s, "mhlo.", 5) == 0 ? astr(r, s, n) : sp_op_kind_name(kind);
    if (name == NULL) {
        return r->st;
    }
    opb_begin(r, &b, name);
    cm_status st;
    const sp_pretty *pd = sp_mlir_pretty(kind);
    if (pd != NULL) {
        st = keyword_op(r, &b, pd);
    } else if (custom_readers[kind] != NULL) {
        st = custom_readers[kind](r, &b);
    } else if (strncmp(name, "sdy.", 4) == 0) {
        st = sdy_op(r, &b, kind);
    } else if (strncmp(name, "chlo.", 5) == 0) {
        st = chlo_op(r, &b, kind);
    } else {
        st = fail_at(r, s,
                     "the custom form of '%s' is not supported; write it in the generic form "
                     "\"%s\"(...)",
                     name, name);
    }
    if (st != CM_OK) {
        return r->st;
    }
    return finish_op(r, &b, block, line, col, rn, rl, rc, nrn, NULL);
}

/* ---- module ------------------------------------------------------------------------ */

static cm_status parse_module(rd *r)
{
    sp_module *m = r->m;
    if (push_scope(r) != CM_OK) {
        return r->st;
    }
    while (at_alias_def(r)) {
        if (alias_def(r) != CM_OK) {
            return r->st;
        }
    }
    if (kw(r, "module")) {
        m->had_module_op = true;
        if (peek(r) == '@') {
            const char *s;
            uint32_t n;
            if (bare_symbol(r, "module", &s, &n) != CM_OK) {
                return r->st;
            }
            m->sym_name = astr(r, s, n);
        }
        if (kw(r, "attributes")) {
            uint32_t k;
            if (attr_dict_entries(r, &k) != CM_OK) {
                return r->st;
            }
            m->n_attrs = k;
            m->attrs = pop_attrs(r, k);
        }
        if (expect(r, '{') != CM_OK || parse_block_body(r, m->body) != CM_OK) {
            return r->st;
        }
        if (expect(r, '}') != CM_OK) {
            return r->st;
        }
        if (peek_kw(r, "loc") && loc_clause(r, &m->loc, NULL) != CM_OK) {
            return r->st;
        }
        while (at_alias_def(r)) {
            if (alias_def(r) != CM_OK) {
                return r->st;
            }
        }
    } else if (parse_block_body(r, m->body) != CM_OK) {
        return r->st;
    }
    if (peek(r) >= 0 && m->had_module_op && peek_kw(r, "module")) {
        /* `// -----` is a comment here: only opt -split-input-file splits */
        return fail(r, "a second module: the input holds one module (split several at "
                       "`// -----` with `shardplan opt -split-input-file`)");
    }
    if (peek(r) >= 0) {
        return fail(r, "unexpected '%c' at top level", *r->p);
    }
    for (uint32_t i = 0; i < r->n_loc_refs; i++) {
        if (loc_resolve(r, r->loc_refs[i], 0) != CM_OK) {
            return r->st;
        }
    }
    pop_scope(r);
    return CM_OK;
}

static cm_status fail_nul(rd *r, const char *at)
{
    /* count lines up to at so that the position is right */
    for (const char *q = r->base; q < at; q++) {
        if (*q == '\n') {
            r->line++;
            r->line_start = q + 1;
        }
    }
    r->p = at;
    return fail_at(r, at, "unexpected NUL byte in the input");
}

cm_status sp_mlir_read(const char *text, size_t len, uint32_t line_base, sp_module **out,
                       cm_error *err)
{
    return sp_mlir_read_ex(text, len, line_base, out, NULL, err);
}

cm_status sp_mlir_read_ex(const char *text, size_t len, uint32_t line_base, sp_module **out,
                          sp_parse_notes *notes, cm_error *err)
{
    *out = NULL;
    if (len > UINT32_MAX) {
        return cm_error_set(err, CM_EINVAL, NULL, "input larger than 4 GiB");
    }
    rd r;
    memset(&r, 0, sizeof r);
    r.base = text;
    r.p = text;
    r.end = text + len;
    r.line = line_base + 1;
    r.line_start = text;
    r.err = err;
    r.notes = notes;
    r.m = sp_module_create();
    if (r.m == NULL) {
        return cm_error_oom(err);
    }
    /* a raw NUL byte would cut the text kept verbatim (types, opaque
     * attributes); MLIR's lexer rejects it too */
    const char *nul = memchr(text, '\0', len);
    cm_status st = nul != NULL ? fail_nul(&r, nul) : parse_module(&r);
    if (st == CM_OK && r.n_aliases > 0) {
        r.m->aliases = cm_arena_memdup(&r.m->arena, r.aliases, r.n_aliases, sizeof(sp_alias));
        r.m->n_aliases = r.n_aliases;
        if (r.m->aliases == NULL) {
            st = cm_error_oom(err);
        }
    }
    cm_free(r.aliases);
    cm_free(r.loc_refs);
    cm_free(r.loc_aliases);
    cm_free(r.type_aliases);
    cm_free(r.tcache);
    cm_free(r.names);
    cm_free(r.slots);
    cm_free(r.scopes);
    cm_free(r.ops.v);
    cm_free(r.types.v);
    cm_free(r.blocks.v);
    cm_free(r.attrs.v);
    if (st != CM_OK) {
        sp_module_destroy(r.m);
        return st;
    }
    *out = r.m;
    return CM_OK;
}

/* ---- single attributes and types (used by the JSON graph reader, H7) -------------
 * Both parse one complete value from text (surrounding whitespace allowed) into
 * module m, with the same canonical kinds the module reader produces. Errors:
 * CM_EINVAL with err->path "1:COL" (column within text), CM_ENOMEM. */

static void rd_single_init(rd *r, sp_module *m, const char *text, size_t len, cm_error *err)
{
    memset(r, 0, sizeof *r);
    r->base = text;
    r->p = text;
    r->end = text + len;
    r->line = 1;
    r->line_start = text;
    r->err = err;
    r->m = m;
}

static cm_status rd_single_fini(rd *r, cm_status st)
{
    if (st == CM_OK && peek(r) >= 0) {
        st = fail(r, "unexpected '%c' after the value", *r->p);
    }
    /* the same buffers sp_mlir_read frees */
    cm_free(r->aliases);
    cm_free(r->loc_refs);
    cm_free(r->loc_aliases);
    cm_free(r->type_aliases);
    cm_free(r->tcache);
    cm_free(r->names);
    cm_free(r->slots);
    cm_free(r->scopes);
    cm_free(r->ops.v);
    cm_free(r->types.v);
    cm_free(r->blocks.v);
    cm_free(r->attrs.v);
    return st;
}

cm_status sp_mlir_parse_attr(sp_module *m, const char *text, size_t len, sp_attr **out,
                             cm_error *err)
{
    *out = NULL;
    if (len > UINT32_MAX) {
        return cm_error_set(err, CM_EINVAL, NULL, "attribute text larger than 4 GiB");
    }
    rd r;
    rd_single_init(&r, m, text, len, err);
    sp_attr *a = NULL;
    cm_status st = attr_value(&r, &a);
    st = rd_single_fini(&r, st);
    if (st == CM_OK) {
        *out = a;
    }
    return st;
}

cm_status sp_mlir_parse_type(sp_module *m, const char *text, size_t len, uint32_t *type_out,
                             cm_error *err)
{
    if (len > UINT32_MAX) {
        return cm_error_set(err, CM_EINVAL, NULL, "type text larger than 4 GiB");
    }
    rd r;
    rd_single_init(&r, m, text, len, err);
    uint32_t t = 0;
    cm_status st = type(&r, &t);
    st = rd_single_fini(&r, st);
    if (st == CM_OK) {
        *type_out = t;
    }
    return st;
}
