/* SPDX-License-Identifier: Apache-2.0
 * planner: parsers, printers and verifiers for Shardy meshes, tensor
 * shardings and op sharding rules, and the reader of JAX's einsum-like rule
 * strings. Parsed objects live in the caller's arena; after an error the
 * arena may hold partial objects, which go away with the arena. Parser errors
 * carry "col N" (1-based byte offset into the text given). */
#include "sp_shard.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define MAX_RANK        64u        /* dims of a tensor */
#define MAX_AXES        1024u      /* mesh axes, axis refs in one list */
#define MAX_DEVICES     (1u << 24) /* explicit device ids */
#define MAX_FACTORS     65536u     /* factors of a rule */
#define MAX_TENSORS     65536u     /* operands or results of a rule */
#define MAX_EINSUM_LEN  16384u     /* bytes of a JAX rule string */
#define N_LETTER_FACTOR 18u        /* i..z; then z_1, z_2, ... */

/* ==== parsing infrastructure ============================================== */

typedef struct parser {
    const char *s;
    size_t len;
    size_t pos; /* byte offset of the next unread byte */
    cm_arena *a;
    cm_error *err;
    cm_status st; /* first failure, CM_OK while fine */
    sp_parse_notes *notes; /* MLIR's further errors, or NULL */
    uint32_t soft;         /* 1 + the note index of the first non-fatal error, 0 none */
    bool strict;           /* sp_rule_parse: the rule checks too */
    bool quiet;            /* the failure is one Shardy's verifier reports: no notes */
    size_t *offs;          /* strict rules: offset of each factor symbol read, in order */
    uint32_t n_offs, cap_offs;
} parser;

void sp_parse_notes_add(sp_parse_notes *notes, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (notes == NULL || notes->n >= SP_PARSE_NOTES_MAX) {
        return;
    }
    sp_parse_note *n = &notes->items[notes->n++];
    n->line = line;
    n->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->msg, sizeof n->msg, fmt, ap);
    va_end(ap);
}

/* Records one of MLIR's further errors at byte offset at (see sp_parse_notes). */
static void note(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(parser *p, size_t at, const char *fmt, ...)
{
    if (p->notes == NULL || p->notes->n >= SP_PARSE_NOTES_MAX || p->st == CM_ENOMEM ||
        p->quiet) {
        return;
    }
    sp_parse_note *n = &p->notes->items[p->notes->n++];
    n->line = 0;
    n->col = at + 1 > UINT32_MAX ? UINT32_MAX : (uint32_t)(at + 1);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->msg, sizeof n->msg, fmt, ap);
    va_end(ap);
}

static bool failv(parser *p, size_t at, const char *fmt, va_list ap)
{
    char path[40];
    snprintf(path, sizeof path, "col %zu", at + 1);
    cm_error_setv(p->err, CM_EINVAL, path, fmt, ap);
    if (p->st == CM_OK) {
        p->st = CM_EINVAL;
    }
    return false;
}

static bool fail(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(parser *p, size_t at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(p, at, fmt, ap);
    va_end(ap);
    return false;
}

static bool oom(parser *p)
{
    cm_error_oom(p->err);
    if (p->st == CM_OK) {
        p->st = CM_ENOMEM;
    }
    return false;
}

static void ws(parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            break;
        }
        p->pos++;
    }
}

/* Describes the byte at the cursor for "expected X, found Y" messages. */
static const char *found(const parser *p, char *buf, size_t n)
{
    if (p->pos >= p->len) {
        return "end of input";
    }
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c >= 0x21 && c < 0x7f) {
        snprintf(buf, n, "'%c'", (char)c);
    } else {
        snprintf(buf, n, "byte 0x%02x", (unsigned)c);
    }
    return buf;
}

static bool fail_expect(parser *p, const char *what)
{
    char buf[16];
    ws(p);
    return fail(p, p->pos, "expected %s, found %s", what, found(p, buf, sizeof buf));
}

static bool peek(parser *p, char c)
{
    ws(p);
    return p->pos < p->len && p->s[p->pos] == c;
}

static bool eat(parser *p, char c)
{
    if (peek(p, c)) {
        p->pos++;
        return true;
    }
    return false;
}

static bool expect(parser *p, char c, const char *what)
{
    if (eat(p, c)) {
        return true;
    }
    return fail_expect(p, what);
}

/* MLIR's token check: "expected 'c'" at the cursor. */
static bool expect_tok(parser *p, char c)
{
    if (eat(p, c)) {
        return true;
    }
    return fail(p, p->pos, "expected '%c'", c);
}

static bool is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '.';
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Length of the identifier at the cursor (after whitespace), 0 if none. */
static size_t ident_len(parser *p)
{
    ws(p);
    size_t n = 0;
    if (p->pos < p->len && (is_alpha(p->s[p->pos]) || p->s[p->pos] == '_')) {
        n = 1;
        while (p->pos + n < p->len && is_ident_char(p->s[p->pos + n])) {
            n++;
        }
    }
    return n;
}

/* Consumes keyword kw if it is the whole identifier at the cursor. */
static bool keyword(parser *p, const char *kw)
{
    size_t n = ident_len(p);
    if (n == strlen(kw) && memcmp(p->s + p->pos, kw, n) == 0) {
        p->pos += n;
        return true;
    }
    return false;
}

static bool parse_int(parser *p, int64_t *out, const char *what)
{
    ws(p);
    size_t start = p->pos;
    bool neg = false;
    if (p->pos < p->len && p->s[p->pos] == '-') {
        neg = true;
        p->pos++;
    }
    if (p->pos >= p->len || !is_digit(p->s[p->pos])) {
        p->pos = start;
        return fail_expect(p, what);
    }
    uint64_t v = 0;
    while (p->pos < p->len && is_digit(p->s[p->pos])) {
        uint64_t d = (uint64_t)(p->s[p->pos] - '0');
        if (v > (UINT64_MAX - d) / 10u) {
            return fail(p, start, "%s is out of range", what);
        }
        v = v * 10u + d;
        p->pos++;
    }
    if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) {
        return fail(p, start, "%s is out of range", what);
    }
    *out = neg ? (int64_t)(0u - v) : (int64_t)v;
    return true;
}

/* An MLIR string literal: "..." with \\ \" \n \t and \XX escapes. */
static bool parse_string(parser *p, const char **out, const char *what)
{
    ws(p);
    if (p->pos >= p->len || p->s[p->pos] != '"') {
        return fail_expect(p, what);
    }
    size_t start = p->pos++;
    size_t end = p->pos;
    while (end < p->len && p->s[end] != '"') {
        if (p->s[end] == '\n') {
            return fail(p, start, "%s: string is not terminated before the end of the line", what);
        }
        end += p->s[end] == '\\' && end + 1 < p->len ? 2 : 1;
    }
    if (end >= p->len) {
        return fail(p, start, "%s: string is not terminated", what);
    }
    char *buf = cm_arena_alloc(p->a, end - p->pos + 1);
    if (buf == NULL) {
        return oom(p);
    }
    size_t n = 0;
    while (p->pos < end) {
        char c = p->s[p->pos];
        if (c != '\\') {
            buf[n++] = c;
            p->pos++;
            continue;
        }
        char e = p->s[p->pos + 1];
        if (e == '\\' || e == '"') {
            buf[n++] = e;
            p->pos += 2;
        } else if (e == 'n') {
            buf[n++] = '\n';
            p->pos += 2;
        } else if (e == 't') {
            buf[n++] = '\t';
            p->pos += 2;
        } else if (p->pos + 2 < end && cm_hex_digit(e) >= 0 &&
                   cm_hex_digit(p->s[p->pos + 2]) >= 0) {
            int v = cm_hex_digit(e) * 16 + cm_hex_digit(p->s[p->pos + 2]);
            if (v == 0) {
                return fail(p, p->pos, "%s must not contain a NUL byte", what);
            }
            buf[n++] = (char)(unsigned char)v;
            p->pos += 3;
        } else {
            return fail(p, p->pos, "%s: unknown escape in string", what);
        }
    }
    buf[n] = '\0';
    p->pos = end + 1;
    *out = buf;
    return true;
}

/* Grows an arena array of elem-byte entries so that index n fits; returns the
 * (possibly moved) array or NULL on OOM. The old block stays in the arena. */
static void *grow(parser *p, void *arr, uint32_t *cap, uint32_t n, size_t elem)
{
    if (n < *cap) {
        return arr;
    }
    uint32_t nc = *cap == 0 ? 4u : *cap * 2u;
    size_t bytes;
    if (*cap > UINT32_MAX / 2u || !cm_mul_size(nc, elem, &bytes)) {
        oom(p);
        return NULL;
    }
    void *q = cm_arena_alloc(p->a, bytes);
    if (q == NULL) {
        oom(p);
        return NULL;
    }
    if (n > 0) {
        memcpy(q, arr, (size_t)n * elem);
    }
    *cap = nc;
    return q;
}

/* Arena array of n entries (at least one byte, so never NULL on success). */
/* Strict rule parse: remembers where the next factor symbol was read, so
 * that rule_strict_check can point at it. */
static bool record_off(parser *p, size_t at)
{
    if (!p->strict) {
        return true;
    }
    size_t *t = grow(p, p->offs, &p->cap_offs, p->n_offs, sizeof *t);
    if (t == NULL) {
        return false;
    }
    p->offs = t;
    t[p->n_offs++] = at;
    return true;
}

static void *arr_alloc(cm_arena *a, size_t n, size_t elem)
{
    size_t bytes;
    if (!cm_mul_size(n, elem, &bytes)) {
        return NULL;
    }
    return cm_arena_zalloc(a, bytes == 0 ? 1 : bytes);
}

/* The body parsers the sp_*_parse entry points run: they fill obj (an
 * sp_mesh, sp_sharding or sp_rule) from the text at the cursor. */
typedef bool parse_body_fn(parser *p, void *obj);

/* What every sp_*_parse does: a parser over text, an object of size bytes
 * in a for body to fill, and the bytes consumed. *out is set on success
 * only. A non-fatal error (soft_fail) fails a parse that otherwise succeeds:
 * its note becomes the error. */
static cm_status parse_entry_mode(const char *text, size_t len, cm_arena *a, size_t size,
                                  parse_body_fn *body, void **out, size_t *consumed_out,
                                  sp_parse_notes *notes, bool strict, cm_error *err)
{
    parser p = {text, len, 0, a, err, CM_OK, notes, 0, strict, false, NULL, 0, 0};
    void *obj = cm_arena_alloc(a, size);
    if (obj == NULL) {
        oom(&p);
        return p.st;
    }
    if (!body(&p, obj)) {
        return p.st;
    }
    if (p.soft != 0) {
        sp_parse_note n = notes->items[p.soft - 1u];
        for (uint32_t k = p.soft; k < notes->n; k++) {
            notes->items[k - 1u] = notes->items[k];
        }
        notes->n--;
        fail(&p, n.col - 1u, "%s", n.msg);
        return p.st;
    }
    if (consumed_out != NULL) {
        *consumed_out = p.pos;
    }
    *out = obj;
    return CM_OK;
}

static cm_status parse_entry(const char *text, size_t len, cm_arena *a, size_t size,
                             parse_body_fn *body, void **out, size_t *consumed_out,
                             sp_parse_notes *notes, cm_error *err)
{
    return parse_entry_mode(text, len, a, size, body, out, consumed_out, notes, false, err);
}

/* ==== meshes ============================================================== */

/* True when m's device ids are exactly 0, 1, ..., product(axis sizes) - 1. */
static bool device_ids_are_iota(const sp_mesh *m)
{
    int64_t total = 1;
    for (uint32_t i = 0; i < m->n_axes; i++) {
        int64_t size = m->axes[i].size;
        if (size <= 0 || total > (int64_t)m->n_device_ids / size) {
            return false;
        }
        total *= size;
    }
    if (total != (int64_t)m->n_device_ids) {
        return false;
    }
    for (uint32_t i = 0; i < m->n_device_ids; i++) {
        if (m->device_ids[i] != (int64_t)i) {
            return false;
        }
    }
    return true;
}

static bool parse_mesh_body(parser *p, void *obj)
{
    sp_mesh *m = obj;
    memset(m, 0, sizeof *m);
    uint32_t cap = 0;
    if (!expect(p, '<', "'<' to start a mesh") || !expect(p, '[', "'[' to start the mesh axes")) {
        return false;
    }
    if (!eat(p, ']')) {
        for (;;) {
            ws(p);
            size_t at = p->pos;
            if (m->n_axes >= MAX_AXES) {
                return fail(p, at, "a mesh may have at most %u axes", MAX_AXES);
            }
            sp_mesh_axis *t = grow(p, m->axes, &cap, m->n_axes, sizeof *t);
            if (t == NULL) {
                return false;
            }
            m->axes = t;
            sp_mesh_axis *ax = &m->axes[m->n_axes];
            if (!parse_string(p, &ax->name, "a quoted axis name") ||
                !expect(p, '=', "'=' after the axis name") ||
                !parse_int(p, &ax->size, "an integer axis size")) {
                return false;
            }
            m->n_axes++;
            if (eat(p, ']')) {
                break;
            }
            if (!expect(p, ',', "',' or ']' after a mesh axis")) {
                return false;
            }
        }
    }
    if (eat(p, ',')) {
        if (!keyword(p, "device_ids")) {
            return fail_expect(p, "'device_ids'");
        }
        if (!expect(p, '=', "'=' after device_ids") ||
            !expect(p, '[', "'[' to start the device ids")) {
            return false;
        }
        cap = 0;
        for (;;) {
            ws(p);
            if (m->n_device_ids >= MAX_DEVICES) {
                return fail(p, p->pos, "a mesh may have at most %u device ids", MAX_DEVICES);
            }
            int64_t *t = grow(p, m->device_ids, &cap, m->n_device_ids, sizeof *t);
            if (t == NULL) {
                return false;
            }
            m->device_ids = t;
            if (!parse_int(p, &m->device_ids[m->n_device_ids], "an integer device id")) {
                return false;
            }
            m->n_device_ids++;
            if (eat(p, ']')) {
                break;
            }
            if (!expect(p, ',', "',' or ']' after a device id")) {
                return false;
            }
        }
        /* Like Shardy's mesh builder: device ids equal to iota(product of the
         * axis sizes) are the default order, dropped (a mesh with no axes
         * keeps its single id). */
        if (m->n_axes > 0 && device_ids_are_iota(m)) {
            m->device_ids = NULL;
            m->n_device_ids = 0;
        }
    }
    return expect(p, '>', "'>' to end the mesh");
}

cm_status sp_mesh_parse_ex(const char *text, size_t len, cm_arena *a, sp_mesh **out,
                           size_t *consumed_out, sp_parse_notes *notes, cm_error *err)
{
    void *obj = NULL;
    cm_status st = parse_entry(text, len, a, sizeof(sp_mesh), parse_mesh_body, &obj,
                               consumed_out, notes, err);
    if (st == CM_OK) {
        *out = obj;
    }
    return st;
}

cm_status sp_mesh_parse(const char *text, size_t len, cm_arena *a, sp_mesh **out,
                        size_t *consumed_out, cm_error *err)
{
    return sp_mesh_parse_ex(text, len, a, out, consumed_out, NULL, err);
}

/* MLIR's printEscapedString inside double quotes. */
static void put_quoted(cm_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    cm_buf_putc(b, '"');
    for (const unsigned char *q = (const unsigned char *)s; *q != '\0'; q++) {
        if (*q == '\\') {
            cm_buf_puts(b, "\\\\");
        } else if (*q >= 0x20 && *q < 0x7f && *q != '"') {
            cm_buf_putc(b, (char)*q);
        } else {
            char e[3] = {'\\', hex[*q >> 4], hex[*q & 15u]};
            cm_buf_append(b, e, 3);
        }
    }
    cm_buf_putc(b, '"');
}

void sp_mesh_print(const sp_mesh *m, cm_buf *b)
{
    cm_buf_puts(b, "<[");
    for (uint32_t i = 0; i < m->n_axes; i++) {
        if (i > 0) {
            cm_buf_puts(b, ", ");
        }
        put_quoted(b, m->axes[i].name);
        cm_buf_putc(b, '=');
        cm_buf_put_i64(b, m->axes[i].size);
    }
    cm_buf_putc(b, ']');
    if (m->n_device_ids > 0) {
        cm_buf_puts(b, ", device_ids=[");
        for (uint32_t i = 0; i < m->n_device_ids; i++) {
            if (i > 0) {
                cm_buf_puts(b, ", ");
            }
            cm_buf_put_i64(b, m->device_ids[i]);
        }
        cm_buf_putc(b, ']');
    }
    cm_buf_putc(b, '>');
}

int64_t sp_mesh_size(const sp_mesh *m)
{
    /* -1 when a size is not positive or the product overflows. */
    int64_t n = 1;
    for (uint32_t i = 0; i < m->n_axes; i++) {
        if (m->axes[i].size <= 0 || !cm_mul_i64(n, m->axes[i].size, &n)) {
            return -1;
        }
    }
    return n;
}

int32_t sp_mesh_axis_index(const sp_mesh *m, const char *name)
{
    if (m == NULL || name == NULL) {
        return -1;
    }
    for (uint32_t i = 0; i < m->n_axes && i < (uint32_t)INT32_MAX; i++) {
        const char *a = m->axes[i].name, *b = name;
        if (a == NULL) {
            continue;
        }
        /* inline: axis names are short and looked up per dim per step */
        while (*a != '\0' && *a == *b) {
            a++;
            b++;
        }
        if (*a == *b) {
            return (int32_t)i;
        }
    }
    return -1;
}

static cm_status vfail(cm_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cm_status vfail(cm_error *err, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cm_error_setv(err, CM_EINVAL, path, fmt, ap);
    va_end(ap);
    return CM_EINVAL;
}

cm_status sp_mesh_verify(const sp_mesh *m, cm_error *err)
{
    char path[64];
    if (m->n_axes == 0) {
        if (m->n_device_ids > 1) {
            return vfail(err, "/device_ids",
                         "a mesh without axes may have at most one device id (maximal mesh), "
                         "got %u",
                         m->n_device_ids);
        }
        if (m->n_device_ids == 1 && m->device_ids[0] < 0) {
            return vfail(err, "/device_ids/0", "device ids must be non-negative, got %lld",
                         (long long)m->device_ids[0]);
        }
        return CM_OK;
    }
    int64_t total = 1;
    for (uint32_t i = 0; i < m->n_axes; i++) {
        snprintf(path, sizeof path, "/axes/%u", i);
        const sp_mesh_axis *ax = &m->axes[i];
        if (ax->name == NULL) {
            return vfail(err, path, "axis has no name");
        }
        if (ax->size <= 0) {
            return vfail(err, path, "axis \"%s\" has size %lld; axis sizes must be positive",
                         ax->name, (long long)ax->size);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(m->axes[j].name, ax->name) == 0) {
                return vfail(err, path, "duplicate axis name: \"%s\"", ax->name);
            }
        }
        if (!cm_mul_i64(total, ax->size, &total)) {
            return vfail(err, path, "product of axis sizes overflows");
        }
    }
    if (m->n_device_ids == 0) {
        return CM_OK;
    }
    if ((int64_t)m->n_device_ids != total) {
        return vfail(err, "/device_ids",
                     "total product of axis sizes %lld must match the number of device ids %u",
                     (long long)total, m->n_device_ids);
    }
    size_t words = ((size_t)total + 63u) / 64u;
    uint64_t *seen = cm_calloc(words, sizeof *seen);
    if (seen == NULL) {
        return cm_error_oom(err);
    }
    bool iota = true;
    for (uint32_t i = 0; i < m->n_device_ids; i++) {
        int64_t id = m->device_ids[i];
        snprintf(path, sizeof path, "/device_ids/%u", i);
        if (id < 0 || id >= total) {
            cm_free(seen);
            return vfail(err, path, "sorted device ids must be iota(%lld): id %lld is out of range",
                         (long long)total, (long long)id);
        }
        uint64_t bit = (uint64_t)1 << ((uint64_t)id % 64u);
        if (seen[(uint64_t)id / 64u] & bit) {
            cm_free(seen);
            return vfail(err, path, "sorted device ids must be iota(%lld): id %lld repeats",
                         (long long)total, (long long)id);
        }
        seen[(uint64_t)id / 64u] |= bit;
        iota = iota && id == (int64_t)i;
    }
    cm_free(seen);
    if (iota) {
        return vfail(err, "/device_ids",
                     "device ids equal iota(%lld); omit device_ids for the default order",
                     (long long)total);
    }
    return CM_OK;
}

/* ==== shardings =========================================================== */

/* An axis ref `"x"` or `"x":(pre)size`, as Shardy's AxisRef parser reads it:
 * a failure is reported with the AxisRef (and SubAxisInfo) parameter it was
 * in. Shardy's verifier rejects a pre-size below 1; so do we, here, since a
 * pre-size of 0 marks a full axis in sp_axis_ref. */
static bool parse_axis_ref(parser *p, sp_axis_ref *r)
{
    r->pre_size = 0;
    r->size = 0;
    ws(p);
    if (p->pos >= p->len || p->s[p->pos] != '"') {
        fail(p, p->pos, "expected string");
        note(p, p->pos,
             "failed to parse Sdy_AxisRef parameter 'name' which is to be a `::llvm::StringRef`");
        return false;
    }
    if (!parse_string(p, &r->name, "an axis name")) {
        return false;
    }
    ws(p);
    if (!eat(p, ':')) {
        return true;
    }
    size_t at = p->pos;
    if (!expect_tok(p, '(') || !parse_int(p, &r->pre_size, "an integer sub-axis pre-size") ||
        !expect_tok(p, ')') || !parse_int(p, &r->size, "an integer sub-axis size")) {
        note(p, p->pos,
             "failed to parse Sdy_AxisRef parameter 'sub_axis_info' which is to be a "
             "`SubAxisInfoAttr`");
        return false;
    }
    if (r->pre_size < 1) {
        char name[96];
        snprintf(name, sizeof name, "%s", r->name);
        p->quiet = true;
        if (p->notes != NULL) {
            p->notes->quiet = true;
        }
        return fail(p, at, "sub-axis pre-size must be at least 1: \"%s\":(%lld)%lld", name,
                    (long long)r->pre_size, (long long)r->size);
    }
    return true;
}

/* `{"a", "b":(1)2}` after replicated= / unreduced=, as Shardy's axis-list
 * parser reads it: '{', at least one axis ref, '}'. */
static bool parse_axis_list(parser *p, sp_axis_ref **out, uint32_t *n_out)
{
    uint32_t cap = 0;
    *out = NULL;
    *n_out = 0;
    if (!expect_tok(p, '{')) {
        return false;
    }
    for (;;) {
        ws(p);
        if (*n_out >= MAX_AXES) {
            return fail(p, p->pos, "an axis list may have at most %u axes", MAX_AXES);
        }
        sp_axis_ref *t = grow(p, *out, &cap, *n_out, sizeof *t);
        if (t == NULL) {
            return false;
        }
        *out = t;
        if (!parse_axis_ref(p, &t[*n_out])) {
            note(p, p->pos,
                 "failed to parse axis list which is expected to be an `ArrayRef<AxisRefAttr>`");
            return false;
        }
        (*n_out)++;
        if (!eat(p, ',')) {
            break;
        }
    }
    return expect_tok(p, '}');
}

/* `{"a", ?}p1`, as Shardy's DimensionSharding parser reads it. */
static bool parse_dim(parser *p, sp_dim_sharding *d)
{
    uint32_t cap = 0;
    d->axes = NULL;
    d->n_axes = 0;
    d->is_closed = true;
    d->priority = -1;
    if (!expect_tok(p, '{')) {
        return false;
    }
    while (!eat(p, '}')) {
        if (d->n_axes > 0 && !expect_tok(p, ',')) {
            return false;
        }
        if (eat(p, '?')) {
            d->is_closed = false;
            if (!expect_tok(p, '}')) {
                return false;
            }
            break;
        }
        if (d->n_axes >= MAX_AXES) {
            return fail(p, p->pos, "a dimension may have at most %u axes", MAX_AXES);
        }
        sp_axis_ref *t = grow(p, d->axes, &cap, d->n_axes, sizeof *t);
        if (t == NULL) {
            return false;
        }
        d->axes = t;
        if (!parse_axis_ref(p, &d->axes[d->n_axes])) {
            return false;
        }
        d->n_axes++;
    }
    size_t n = ident_len(p);
    if (n == 0) {
        return true;
    }
    /* a keyword after the '}': the priority `p<number>` */
    const char *w = p->s + p->pos;
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)(n < 60 ? n : 60), w);
    size_t at = p->pos;
    p->pos += n;
    bool digits = n >= 2 && w[0] == 'p';
    for (size_t i = 1; digits && i < n; i++) {
        digits = is_digit(w[i]);
    }
    if (!digits) {
        return fail(p, at, "expecting priority in format 'p<number>', got: %s", word);
    }
    if (w[1] == '0' && n > 2) {
        return fail(p, at, "priorities with leading zeros are not allowed, got: %s", word);
    }
    uint64_t v = 0;
    for (size_t i = 1; i < n; i++) {
        uint64_t dg = (uint64_t)(w[i] - '0');
        if (v > ((uint64_t)INT64_MAX - dg) / 10u) {
            return fail(p, at, "expecting integer priority, got: %s", word);
        }
        v = v * 10u + dg;
    }
    if (v > INT32_MAX) {
        return fail(p, at, "priority %s is too large (at most p%d)", word, INT32_MAX);
    }
    d->priority = (int32_t)v;
    return true;
}

static bool parse_symbol(parser *p, const char **out)
{
    /* the '@' is consumed */
    if (p->pos < p->len && p->s[p->pos] == '"') {
        return parse_string(p, out, "a mesh name");
    }
    size_t n = 0;
    if (p->pos < p->len && (is_alpha(p->s[p->pos]) || p->s[p->pos] == '_')) {
        n = 1;
        while (p->pos + n < p->len && is_ident_char(p->s[p->pos + n])) {
            n++;
        }
    }
    if (n == 0) {
        return fail_expect(p, "a mesh name after '@'");
    }
    *out = cm_arena_strndup(p->a, p->s + p->pos, n);
    if (*out == NULL) {
        return oom(p);
    }
    p->pos += n;
    return true;
}

/* The `, replicated={...}, unreduced=max{...}` tail of a sharding, as
 * Shardy's parseReplicatedAndUnreducedAxes reads it: each list at most once,
 * in either order, and nothing else after a comma. */
static bool parse_replicated_unreduced(parser *p, sp_sharding *s)
{
    bool seen_rep = false;
    bool seen_unr = false;
    s->reduction = SP_REDUCTION_SUM;
    while (eat(p, ',')) {
        ws(p);
        if (!seen_rep && keyword(p, "replicated")) {
            seen_rep = true;
            if (!expect_tok(p, '=') || !parse_axis_list(p, &s->replicated, &s->n_replicated)) {
                note(p, p->pos, "failed to parse Sdy_TensorSharding parameter 'replicated_axes'");
                return false;
            }
        } else if (!seen_unr && keyword(p, "unreduced")) {
            seen_unr = true;
            /* `unreduced{..}`, `unreduced={..}`, `unreduced=sum{..}`,
             * `unreduced=max{..}`, `unreduced=min{..}` */
            if (eat(p, '=')) {
                ws(p);
                if (keyword(p, "max")) {
                    s->reduction = SP_REDUCTION_MAX;
                } else if (keyword(p, "min")) {
                    s->reduction = SP_REDUCTION_MIN;
                } else {
                    (void)keyword(p, "sum");
                }
            }
            if (!parse_axis_list(p, &s->unreduced, &s->n_unreduced)) {
                note(p, p->pos, "failed to parse Sdy_TensorSharding parameter 'unreduced_axes'");
                return false;
            }
        } else {
            return fail(p, p->pos,
                        "failed to parse Sdy_TensorSharding, expected valid named axis list "
                        "after comma");
        }
    }
    return true;
}

static bool parse_sharding_body(parser *p, void *obj)
{
    sp_sharding *s = obj;
    memset(s, 0, sizeof *s);
    if (!expect_tok(p, '<')) {
        return false;
    }
    if (eat(p, '@')) {
        if (!parse_symbol(p, &s->mesh_name)) {
            return false;
        }
    } else if (keyword(p, "mesh")) {
        s->mesh = cm_arena_alloc(p->a, sizeof *s->mesh);
        if (s->mesh == NULL) {
            return oom(p);
        }
        if (!parse_mesh_body(p, s->mesh)) {
            note(p, p->pos, "failed to parse MeshAttr");
            return false;
        }
    } else {
        return fail(p, p->pos, "expecting MeshAttr or FlatSymbolRefAttr");
    }
    if (!expect_tok(p, ',') || !expect_tok(p, '[')) {
        return false;
    }
    uint32_t cap = 0;
    if (!eat(p, ']')) {
        for (;;) {
            ws(p);
            if (s->rank >= MAX_RANK) {
                return fail(p, p->pos, "a sharding may have at most %u dimensions", MAX_RANK);
            }
            sp_dim_sharding *t = grow(p, s->dims, &cap, s->rank, sizeof *t);
            if (t == NULL) {
                return false;
            }
            s->dims = t;
            if (!parse_dim(p, &s->dims[s->rank])) {
                note(p, p->pos,
                     "failed to parse Sdy_TensorSharding parameter 'dim_shardings' which is to "
                     "be a `::llvm::ArrayRef<DimensionShardingAttr>`");
                return false;
            }
            s->rank++;
            if (!eat(p, ',')) {
                break;
            }
        }
        if (!expect_tok(p, ']')) {
            return false;
        }
    }
    return parse_replicated_unreduced(p, s) && expect_tok(p, '>');
}

cm_status sp_sharding_parse_ex(const char *text, size_t len, cm_arena *a, sp_sharding **out,
                               size_t *consumed_out, sp_parse_notes *notes, cm_error *err)
{
    void *obj = NULL;
    cm_status st = parse_entry(text, len, a, sizeof(sp_sharding), parse_sharding_body, &obj,
                               consumed_out, notes, err);
    if (st == CM_OK) {
        *out = obj;
    }
    return st;
}

cm_status sp_sharding_parse(const char *text, size_t len, cm_arena *a, sp_sharding **out,
                            size_t *consumed_out, cm_error *err)
{
    return sp_sharding_parse_ex(text, len, a, out, consumed_out, NULL, err);
}

void sp_axis_ref_print(const sp_axis_ref *r, cm_buf *b)
{
    put_quoted(b, r->name != NULL ? r->name : "");
    if (r->pre_size > 0) {
        cm_buf_puts(b, ":(");
        cm_buf_put_i64(b, r->pre_size);
        cm_buf_putc(b, ')');
        cm_buf_put_i64(b, r->size);
    }
}

static void put_axis_list(cm_buf *b, const sp_axis_ref *r, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            cm_buf_puts(b, ", ");
        }
        sp_axis_ref_print(&r[i], b);
    }
}

static bool is_bare_symbol(const char *s)
{
    if (!is_alpha(s[0]) && s[0] != '_') {
        return false;
    }
    for (const char *q = s + 1; *q != '\0'; q++) {
        if (!is_ident_char(*q)) {
            return false;
        }
    }
    return true;
}

void sp_sharding_print(const sp_sharding *s, cm_buf *b)
{
    cm_buf_putc(b, '<');
    if (s->mesh_name != NULL) {
        cm_buf_putc(b, '@');
        if (is_bare_symbol(s->mesh_name)) {
            cm_buf_puts(b, s->mesh_name);
        } else {
            put_quoted(b, s->mesh_name);
        }
    } else {
        static const sp_mesh empty = {NULL, 0, NULL, 0};
        cm_buf_puts(b, "mesh");
        sp_mesh_print(s->mesh != NULL ? s->mesh : &empty, b);
    }
    cm_buf_puts(b, ", [");
    for (uint32_t i = 0; i < s->rank; i++) {
        const sp_dim_sharding *d = &s->dims[i];
        if (i > 0) {
            cm_buf_puts(b, ", ");
        }
        cm_buf_putc(b, '{');
        put_axis_list(b, d->axes, d->n_axes);
        if (!d->is_closed) {
            cm_buf_puts(b, d->n_axes > 0 ? ", ?" : "?");
        }
        cm_buf_putc(b, '}');
        if (d->priority >= 0) {
            cm_buf_putc(b, 'p');
            cm_buf_put_i64(b, d->priority);
        }
    }
    cm_buf_putc(b, ']');
    if (s->n_replicated > 0) {
        cm_buf_puts(b, ", replicated={");
        put_axis_list(b, s->replicated, s->n_replicated);
        cm_buf_putc(b, '}');
    }
    if (s->n_unreduced > 0) {
        /* Shardy prints the default (sum) kind as nothing. */
        cm_buf_puts(b, ", unreduced=");
        if (s->reduction == SP_REDUCTION_MAX) {
            cm_buf_puts(b, "max");
        } else if (s->reduction == SP_REDUCTION_MIN) {
            cm_buf_puts(b, "min");
        }
        cm_buf_putc(b, '{');
        put_axis_list(b, s->unreduced, s->n_unreduced);
        cm_buf_putc(b, '}');
    }
    cm_buf_putc(b, '>');
}

/* ---- sharding verification ---- */

/* A resolved axis ref: the mesh axis and the [lo, hi) range of pre-sizes it
 * covers (a full axis covers [1, size)). */
typedef struct span {
    uint32_t axis;
    int64_t lo;
    int64_t hi;
} span;

static void ref_path(char *path, size_t n, const sp_sharding *s, uint32_t k)
{
    uint32_t dims_total = 0;
    for (uint32_t d = 0; d < s->rank; d++) {
        if (k < dims_total + s->dims[d].n_axes) {
            snprintf(path, n, "/dims/%u/%u", d, k - dims_total);
            return;
        }
        dims_total += s->dims[d].n_axes;
    }
    k -= dims_total;
    if (k < s->n_replicated) {
        snprintf(path, n, "/replicated/%u", k);
        return;
    }
    snprintf(path, n, "/unreduced/%u", k - s->n_replicated);
}

/* The pointees of a const sharding's arrays are writable; verify fills sizes
 * through this. */
static sp_axis_ref *ref_at(const sp_sharding *s, uint32_t k)
{
    for (uint32_t d = 0; d < s->rank; d++) {
        if (k < s->dims[d].n_axes) {
            return &s->dims[d].axes[k];
        }
        k -= s->dims[d].n_axes;
    }
    if (k < s->n_replicated) {
        return &s->replicated[k];
    }
    return &s->unreduced[k - s->n_replicated];
}

static char *ref_str(char *buf, size_t n, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        snprintf(buf, n, "\"%s\":(%lld)%lld", r->name, (long long)r->pre_size, (long long)r->size);
    } else {
        snprintf(buf, n, "\"%s\"", r->name);
    }
    return buf;
}

static cm_status check_ref(const sp_mesh *m, const sp_axis_ref *r, const char *path, span *out,
                           cm_error *err)
{
    if (r->name == NULL) {
        return vfail(err, path, "axis ref has no name");
    }
    int32_t i = sp_mesh_axis_index(m, r->name);
    if (i < 0) {
        return vfail(err, path, "unknown axis name: \"%s\"", r->name);
    }
    int64_t full = m->axes[i].size;
    out->axis = (uint32_t)i;
    if (r->pre_size == 0) {
        out->lo = 1;
        out->hi = full;
        return CM_OK;
    }
    if (r->pre_size < 0) {
        return vfail(err, path, "sub-axis pre-size must be at least 1, got %lld",
                     (long long)r->pre_size);
    }
    if (r->size <= 1) {
        return vfail(err, path, "sub-axis size must be greater than 1, got %lld",
                     (long long)r->size);
    }
    int64_t next;
    if (!cm_mul_i64(r->pre_size, r->size, &next) || full <= 0 || full % next != 0) {
        return vfail(err, path,
                     "sub-axis \"%s\":(%lld)%lld: pre-size times size must divide the axis "
                     "size %lld",
                     r->name, (long long)r->pre_size, (long long)r->size, (long long)full);
    }
    if (r->size == full) {
        return vfail(err, path,
                     "sub-axis \"%s\":(%lld)%lld has the full axis size; use \"%s\" instead",
                     r->name, (long long)r->pre_size, (long long)r->size, r->name);
    }
    out->lo = r->pre_size;
    out->hi = next;
    return CM_OK;
}

/* Shardy's mesh order: by axis index, then pre-size, then size. */
static int span_cmp(const span *a, const span *b)
{
    if (a->axis != b->axis) {
        return a->axis < b->axis ? -1 : 1;
    }
    if (a->lo != b->lo) {
        return a->lo < b->lo ? -1 : 1;
    }
    if (a->hi != b->hi) {
        return a->hi < b->hi ? -1 : 1;
    }
    return 0;
}

/* Two sub-axes of one axis where the second starts where the first ends
 * could be one bigger sub-axis. */
static bool mergeable(const sp_axis_ref *a, const span *sa, const sp_axis_ref *b, const span *sb)
{
    return a->pre_size > 0 && b->pre_size > 0 && sa->axis == sb->axis && sa->hi == sb->lo;
}

#define NO_DIM UINT32_MAX /* check_list: a list that is not a dim's */

/* The path of ref i of a list: what, then /dim when dim is not NO_DIM,
 * then /i. Built only for an error: verification runs per sharding of
 * every input. */
static void list_path(char *path, size_t cap, const char *what, uint32_t dim, uint32_t i)
{
    if (dim != NO_DIM) {
        snprintf(path, cap, "%s/%u/%u", what, dim, i);
    } else {
        snprintf(path, cap, "%s/%u", what, i);
    }
}

static cm_status check_list(const sp_mesh *m, const sp_axis_ref *r, uint32_t n, const char *what,
                            uint32_t dim, bool ordered, cm_error *err)
{
    char path[64];
    char b1[160];
    char b2[160];
    span prev = {0, 0, 0};
    for (uint32_t i = 0; i < n; i++) {
        span cur;
        cm_status st = check_ref(m, &r[i], "", &cur, NULL);
        if (st != CM_OK) {
            /* again, with the path, for the error */
            list_path(path, sizeof path, what, dim, i);
            return check_ref(m, &r[i], path, &cur, err);
        }
        if (i > 0 &&
            (mergeable(&r[i - 1], &prev, &r[i], &cur) || (ordered && span_cmp(&prev, &cur) > 0))) {
            list_path(path, sizeof path, what, dim, i);
        }
        if (i > 0 && mergeable(&r[i - 1], &prev, &r[i], &cur)) {
            return vfail(err, path, "%s and %s are consecutive sub-axes; merge them into one",
                         ref_str(b1, sizeof b1, &r[i - 1]), ref_str(b2, sizeof b2, &r[i]));
        }
        if (ordered && i > 0 && span_cmp(&prev, &cur) > 0) {
            return vfail(err, path, "%s axes are not ordered w.r.t. the mesh: %s before %s",
                         what + 1, ref_str(b1, sizeof b1, &r[i - 1]),
                         ref_str(b2, sizeof b2, &r[i]));
        }
        prev = cur;
    }
    return CM_OK;
}

cm_status sp_sharding_verify(sp_sharding *s, const sp_mesh *m, uint32_t rank, const int64_t *dims,
                             cm_error *err)
{
    char path[64];
    (void)dims; /* sizes are not constrained: non-divisible and size-0 dims may be sharded */
    if (m == NULL) {
        m = s->mesh;
    }
    if (m == NULL) {
        return vfail(err, "", "sharding has no mesh");
    }
    if (s->rank != rank) {
        return vfail(err, "/dims", "sharding doesn't match tensor rank: %u != %u", s->rank, rank);
    }
    uint32_t total = 0;
    for (uint32_t d = 0; d < s->rank; d++) {
        const sp_dim_sharding *ds = &s->dims[d];
        if (ds->priority < -1) {
            snprintf(path, sizeof path, "/dims/%u", d);
            return vfail(err, path, "dim %u has a negative priority %d", d, ds->priority);
        }
        if (ds->priority >= 0 && ds->is_closed && ds->n_axes == 0) {
            snprintf(path, sizeof path, "/dims/%u", d);
            return vfail(err, path, "dim %u is empty and closed but has a priority", d);
        }
        cm_status st = check_list(m, ds->axes, ds->n_axes, "/dims", d, false, err);
        if (st != CM_OK) {
            return st;
        }
        if (ds->n_axes > UINT32_MAX - total) {
            snprintf(path, sizeof path, "/dims/%u", d);
            return vfail(err, path, "too many axis refs");
        }
        total += ds->n_axes;
    }
    cm_status st = check_list(m, s->replicated, s->n_replicated, "/replicated", NO_DIM, true, err);
    if (st == CM_OK) {
        st = check_list(m, s->unreduced, s->n_unreduced, "/unreduced", NO_DIM, true, err);
    }
    if (st != CM_OK) {
        return st;
    }
    if (s->n_replicated > UINT32_MAX - total ||
        s->n_unreduced > UINT32_MAX - total - s->n_replicated) {
        return vfail(err, "", "too many axis refs");
    }
    total += s->n_replicated + s->n_unreduced;
    /* Pairwise overlap. All refs are valid here, so distinct ones are few
     * (at most 63 per mesh axis) and the first repeat ends the scan early. */
    for (uint32_t i = 0; i < total; i++) {
        const sp_axis_ref *ri = ref_at(s, i);
        span si;
        check_ref(m, ri, "", &si, NULL);
        for (uint32_t j = 0; j < i; j++) {
            const sp_axis_ref *rj = ref_at(s, j);
            span sj;
            check_ref(m, rj, "", &sj, NULL);
            if (si.axis == sj.axis && si.lo < sj.hi && sj.lo < si.hi) {
                char b1[160];
                char b2[160];
                ref_path(path, sizeof path, s, i);
                if (span_cmp(&si, &sj) == 0) {
                    return vfail(err, path, "duplicate axis ref: %s", ref_str(b1, sizeof b1, ri));
                }
                return vfail(err, path, "axis ref %s overlaps %s", ref_str(b1, sizeof b1, ri),
                             ref_str(b2, sizeof b2, rj));
            }
        }
    }
    for (uint32_t i = 0; i < total; i++) {
        sp_axis_ref *r = ref_at(s, i);
        if (r->pre_size == 0) {
            r->size = m->axes[sp_mesh_axis_index(m, r->name)].size;
        }
    }
    return CM_OK;
}

/* ---- sharding utilities ---- */

static bool str_eq(const char *a, const char *b)
{
    if (a == b) {
        return true; /* names are often the same string (the mesh's, an interned one) */
    }
    if (a == NULL || b == NULL) {
        return false;
    }
    return strcmp(a, b) == 0;
}

static bool refs_equal(const sp_axis_ref *a, const sp_axis_ref *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!str_eq(a[i].name, b[i].name) || a[i].pre_size != b[i].pre_size ||
            (a[i].pre_size > 0 && a[i].size != b[i].size)) {
            return false;
        }
    }
    return true;
}

bool sp_mesh_equal(const sp_mesh *a, const sp_mesh *b)
{
    if (a == NULL || b == NULL) {
        return a == b;
    }
    if (a->n_axes != b->n_axes || a->n_device_ids != b->n_device_ids) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_axes; i++) {
        if (!str_eq(a->axes[i].name, b->axes[i].name) || a->axes[i].size != b->axes[i].size) {
            return false;
        }
    }
    for (uint32_t i = 0; i < a->n_device_ids; i++) {
        if (a->device_ids[i] != b->device_ids[i]) {
            return false;
        }
    }
    return true;
}

bool sp_sharding_equal(const sp_sharding *a, const sp_sharding *b)
{
    if (a == b) {
        return true;
    }
    if (a == NULL || b == NULL) {
        return false;
    }
    if (!str_eq(a->mesh_name, b->mesh_name) ||
        (a->mesh_name == NULL && !sp_mesh_equal(a->mesh, b->mesh))) {
        return false;
    }
    if (a->rank != b->rank || a->n_replicated != b->n_replicated ||
        a->n_unreduced != b->n_unreduced ||
        (a->n_unreduced > 0 && a->reduction != b->reduction)) {
        return false;
    }
    for (uint32_t d = 0; d < a->rank; d++) {
        const sp_dim_sharding *x = &a->dims[d];
        const sp_dim_sharding *y = &b->dims[d];
        if (x->n_axes != y->n_axes || x->is_closed != y->is_closed || x->priority != y->priority ||
            !refs_equal(x->axes, y->axes, x->n_axes)) {
            return false;
        }
    }
    return refs_equal(a->replicated, b->replicated, a->n_replicated) &&
           refs_equal(a->unreduced, b->unreduced, a->n_unreduced);
}

sp_sharding *sp_sharding_open(cm_arena *a, const char *mesh_name, uint32_t rank)
{
    sp_sharding *s = cm_arena_zalloc(a, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    if (mesh_name != NULL && (s->mesh_name = cm_arena_strdup(a, mesh_name)) == NULL) {
        return NULL;
    }
    s->dims = arr_alloc(a, rank, sizeof *s->dims);
    if (s->dims == NULL) {
        return NULL;
    }
    s->rank = rank;
    for (uint32_t d = 0; d < rank; d++) {
        s->dims[d].is_closed = false;
        s->dims[d].priority = -1;
    }
    return s;
}

static bool clone_refs(cm_arena *a, const sp_axis_ref *src, uint32_t n, sp_axis_ref **out)
{
    *out = NULL;
    if (n == 0) {
        return true;
    }
    sp_axis_ref *r = arr_alloc(a, n, sizeof *r);
    if (r == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        r[i] = src[i];
        if (src[i].name != NULL && (r[i].name = cm_arena_strdup(a, src[i].name)) == NULL) {
            return false;
        }
    }
    *out = r;
    return true;
}

static sp_mesh *clone_mesh(cm_arena *a, const sp_mesh *m)
{
    sp_mesh *c = cm_arena_zalloc(a, sizeof *c);
    if (c == NULL) {
        return NULL;
    }
    if (m->n_axes > 0) {
        c->axes = arr_alloc(a, m->n_axes, sizeof *c->axes);
        if (c->axes == NULL) {
            return NULL;
        }
        for (uint32_t i = 0; i < m->n_axes; i++) {
            c->axes[i].size = m->axes[i].size;
            if (m->axes[i].name != NULL &&
                (c->axes[i].name = cm_arena_strdup(a, m->axes[i].name)) == NULL) {
                return NULL;
            }
        }
        c->n_axes = m->n_axes;
    }
    if (m->n_device_ids > 0) {
        c->device_ids = cm_arena_memdup(a, m->device_ids, m->n_device_ids, sizeof(int64_t));
        if (c->device_ids == NULL) {
            return NULL;
        }
        c->n_device_ids = m->n_device_ids;
    }
    return c;
}

sp_sharding *sp_sharding_clone(cm_arena *a, const sp_sharding *s)
{
    sp_sharding *c = cm_arena_zalloc(a, sizeof *c);
    if (c == NULL) {
        return NULL;
    }
    if (s->mesh_name != NULL && (c->mesh_name = cm_arena_strdup(a, s->mesh_name)) == NULL) {
        return NULL;
    }
    if (s->mesh != NULL && (c->mesh = clone_mesh(a, s->mesh)) == NULL) {
        return NULL;
    }
    if (s->rank > 0) {
        c->dims = arr_alloc(a, s->rank, sizeof *c->dims);
        if (c->dims == NULL) {
            return NULL;
        }
        for (uint32_t d = 0; d < s->rank; d++) {
            c->dims[d] = s->dims[d];
            if (!clone_refs(a, s->dims[d].axes, s->dims[d].n_axes, &c->dims[d].axes)) {
                return NULL;
            }
        }
        c->rank = s->rank;
    }
    if (!clone_refs(a, s->replicated, s->n_replicated, &c->replicated) ||
        !clone_refs(a, s->unreduced, s->n_unreduced, &c->unreduced)) {
        return NULL;
    }
    c->n_replicated = s->n_replicated;
    c->n_unreduced = s->n_unreduced;
    c->reduction = s->reduction;
    return c;
}

/* ==== op sharding rules =================================================== */

static void put_factor(cm_buf *b, uint32_t f)
{
    if (f < N_LETTER_FACTOR) {
        cm_buf_putc(b, (char)('i' + f));
    } else {
        cm_buf_puts(b, "z_");
        cm_buf_put_i64(b, (int64_t)(f - N_LETTER_FACTOR + 1u));
    }
}

/* Shardy's factorSymbolString: i..z for 0..17, then z_1 for 18, ... */
static void factor_name(char *buf, size_t n, uint64_t f)
{
    if (f < N_LETTER_FACTOR) {
        snprintf(buf, n, "%c", (char)('i' + f));
    } else {
        snprintf(buf, n, "z_%llu", (unsigned long long)(f - N_LETTER_FACTOR + 1u));
    }
}

/* Records an error MLIR emits without stopping the parse: a note, failed at
 * the end of the parse if nothing else fails (fatal at once without notes). */
static bool soft_fail(parser *p, size_t at, const char *msg)
{
    if (p->notes == NULL) {
        return fail(p, at, "%s", msg);
    }
    if (p->soft == 0 && p->notes->n < SP_PARSE_NOTES_MAX) {
        p->soft = p->notes->n + 1u;
    }
    note(p, at, "%s", msg);
    return true;
}

/* Shardy's parseFactorSymbolIndex: decodes the symbol at w[*i] of the
 * keyword w[0..n) (at: its offset), advancing *i: a letter i..z, or z_N with
 * N a positive integer without leading zeros (index 17 + N). */
static bool factor_symbol(parser *p, const char *w, size_t n, size_t *i, size_t at, uint64_t *out)
{
    const char *r = w + *i;
    size_t rn = n - *i;
    int show = (int)(rn < 64 ? rn : 64);
    if (rn < 2 || r[0] != 'z' || r[1] != '_') {
        if (r[0] < 'i' || r[0] > 'z') {
            return fail(p, at, "expecting symbol from 'i' to 'z'. Received: '%c'", r[0]);
        }
        (*i)++;
        *out = (uint64_t)(r[0] - 'i');
        return true;
    }
    size_t k = 2;
    while (k < rn && is_digit(r[k])) {
        k++;
    }
    if (k == 2) {
        return fail(p, at, "expecting integer after 'z_'. Received: '%.*s'", show, r);
    }
    int nd = (int)(k - 2 < 64 ? k - 2 : 64);
    if (r[2] == '0') {
        return fail(p, at, "expecting positive integer without leading zeros. Received: '%.*s'",
                    nd, r + 2);
    }
    uint64_t v = 0;
    for (size_t j = 2; j < k; j++) {
        uint64_t d = (uint64_t)(r[j] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10u) {
            char msg[128];
            snprintf(msg, sizeof msg, "expecting symbol index <=2^63-1. Received: '%.*s'", nd,
                     r + 2);
            if (!soft_fail(p, at, msg)) {
                return false;
            }
            v = 0;
            break;
        }
        v = v * 10u + d;
    }
    *i += k;
    *out = v + (N_LETTER_FACTOR - 1u);
    return true;
}

/* One dim mapping `ijk` (as Shardy's DimMapping parser: no keyword is an
 * empty mapping, left to the verifier); `*` is our printer's empty one. */
static bool parse_dim_mapping(parser *p, sp_dim_mapping *dm)
{
    dm->factors = NULL;
    dm->n_factors = 0;
    if (eat(p, '*')) {
        return true;
    }
    size_t n = ident_len(p);
    if (n == 0) {
        return !p->strict || fail(p, p->pos, "expected factor symbols or '*' for a dimension");
    }
    const char *w = p->s + p->pos;
    size_t at = p->pos;
    p->pos += n;
    uint32_t cap = 0;
    size_t i = 0;
    while (i < n) {
        uint64_t f = 0;
        if (!record_off(p, at + i) || !factor_symbol(p, w, n, &i, at, &f)) {
            return false;
        }
        if (dm->n_factors >= MAX_FACTORS) {
            return fail(p, at, "too many factors");
        }
        uint32_t *t = grow(p, dm->factors, &cap, dm->n_factors, sizeof *t);
        if (t == NULL) {
            return false;
        }
        dm->factors = t;
        t[dm->n_factors++] = f > UINT32_MAX ? UINT32_MAX : (uint32_t)f;
    }
    return true;
}

/* `[i, jk]`: Shardy's TensorMapping. */
static bool parse_tensor_mapping(parser *p, sp_tensor_mapping *tm)
{
    uint32_t cap = 0;
    tm->dims = NULL;
    tm->rank = 0;
    if (!expect_tok(p, '[')) {
        return false;
    }
    if (eat(p, ']')) {
        return true;
    }
    for (;;) {
        ws(p);
        if (tm->rank >= MAX_RANK) {
            return fail(p, p->pos, "a tensor may have at most %u dimensions", MAX_RANK);
        }
        sp_dim_mapping *t = grow(p, tm->dims, &cap, tm->rank, sizeof *t);
        if (t == NULL) {
            return false;
        }
        tm->dims = t;
        if (!parse_dim_mapping(p, &t[tm->rank])) {
            note(p, p->pos,
                 "failed to parse Sdy_TensorMapping parameter 'dim_mappings' which is to be a "
                 "`::llvm::ArrayRef<DimMappingAttr>`");
            return false;
        }
        tm->rank++;
        if (!eat(p, ',')) {
            break;
        }
    }
    return expect_tok(p, ']');
}

/* `([i, j], [j])`: at least one tensor mapping, as Shardy's parameter
 * param (operand_mappings or result_mappings). */
static bool parse_tensor_list(parser *p, const char *param, sp_tensor_mapping **out, uint32_t *n)
{
    uint32_t cap = 0;
    *out = NULL;
    *n = 0;
    if (!expect_tok(p, '(')) {
        return false;
    }
    for (;;) {
        ws(p);
        if (*n >= MAX_TENSORS) {
            return fail(p, p->pos, "at most %u tensors", MAX_TENSORS);
        }
        sp_tensor_mapping *t = grow(p, *out, &cap, *n, sizeof *t);
        if (t == NULL) {
            return false;
        }
        *out = t;
        if (!parse_tensor_mapping(p, &t[*n])) {
            note(p, p->pos,
                 "failed to parse Sdy_OpShardingRule parameter '%s' which is to be a "
                 "`::llvm::ArrayRef<TensorMappingAttr>`",
                 param);
            return false;
        }
        (*n)++;
        if (!eat(p, ',')) {
            break;
        }
    }
    return expect_tok(p, ')');
}

static const char *const special_names[4] = {"reduction", "need_replication", "permutation",
                                             "blocked_propagation"};

/* One factor of a special list: the first symbol of a keyword (Shardy
 * ignores the rest of it). */
static bool special_factor(parser *p, int64_t **list, uint32_t *n, uint32_t *cap)
{
    size_t kn = ident_len(p);
    if (kn == 0) {
        return fail(p, p->pos, "expected valid keyword");
    }
    const char *w = p->s + p->pos;
    size_t at = p->pos;
    p->pos += kn;
    size_t i = 0;
    uint64_t f = 0;
    if (!record_off(p, at) || !factor_symbol(p, w, kn, &i, at, &f)) {
        return false;
    }
    if (*n >= MAX_FACTORS) {
        return fail(p, at, "too many factors");
    }
    int64_t *t = grow(p, *list, cap, *n, sizeof *t);
    if (t == NULL) {
        return false;
    }
    *list = t;
    t[(*n)++] = f > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)f;
    return true;
}

/* `name={i, k}` (braces optional, as Shardy's parseFactorsWithType). */
static bool parse_special_list(parser *p, int64_t **list, uint32_t *n)
{
    uint32_t cap = 0;
    if (!expect_tok(p, '=')) {
        return false;
    }
    bool braces = eat(p, '{');
    if (braces && eat(p, '}')) {
        return true;
    }
    for (;;) {
        if (!special_factor(p, list, n, &cap)) {
            return false;
        }
        if (!eat(p, ',')) {
            break;
        }
    }
    return !braces || expect_tok(p, '}');
}

/* What sp_rule_parse checks beyond the syntax, for rules built as text by
 * the registry and the importers (the reader leaves these to the verifier,
 * with Shardy's messages). */
static bool rule_strict_check(parser *p, const sp_rule *r)
{
    char nb[32];
    uint32_t *stamp = arr_alloc(p->a, r->n_factors, sizeof *stamp);
    if (stamp == NULL) {
        return oom(p);
    }
    uint32_t o = 0; /* index into p->offs, in the order the symbols were read */
#define AT() (o < p->n_offs ? p->offs[o] : 0)
    for (uint32_t t = 0; t < r->n_operands + r->n_results; t++) {
        const sp_tensor_mapping *tm =
            t < r->n_operands ? &r->operands[t] : &r->results[t - r->n_operands];
        for (uint32_t d = 0; d < tm->rank; d++) {
            for (uint32_t k = 0; k < tm->dims[d].n_factors; k++, o++) {
                uint32_t f = tm->dims[d].factors[k];
                factor_name(nb, sizeof nb, f);
                if (f >= r->n_factors) {
                    return fail(p, AT(), "factor %s has no size in the factor sizes%s", nb,
                                r->n_factors == 0 ? " (missing '{...}')" : "");
                }
                if (stamp[f] == t + 1u) {
                    return fail(p, AT(), "factor %s is used twice in one tensor", nb);
                }
                stamp[f] = t + 1u;
            }
        }
    }
    uint8_t *seen = arr_alloc(p->a, r->n_factors, 1);
    uint8_t *blocked = arr_alloc(p->a, r->n_factors, 1);
    if (seen == NULL || blocked == NULL) {
        return oom(p);
    }
    for (int w = 0; w < 4; w++) {
        for (uint32_t k = 0; k < r->n_listed[w]; k++, o++) {
            int64_t f = r->listed[w][k];
            factor_name(nb, sizeof nb, (uint64_t)f);
            if (f >= (int64_t)r->n_factors) {
                return fail(p, AT(), "%s lists factor %s, which has no size", special_names[w],
                            nb);
            }
            uint8_t *mark = w == 3 ? blocked : seen;
            if (mark[f]) {
                return fail(p, AT(), "factor %s %s", nb,
                            w == 3 ? "is listed twice" : "has more than one factor type");
            }
            mark[f] = 1;
        }
    }
#undef AT
    return true;
}

static bool parse_rule_body(parser *p, void *obj)
{
    sp_rule *r = obj;
    memset(r, 0, sizeof *r);
    if (!expect_tok(p, '<') || !parse_tensor_list(p, "operand_mappings", &r->operands,
                                                  &r->n_operands)) {
        return false;
    }
    ws(p);
    if (p->pos + 1 >= p->len || p->s[p->pos] != '-' || p->s[p->pos + 1] != '>') {
        return fail(p, p->pos, "expected '->'");
    }
    p->pos += 2;
    if (!parse_tensor_list(p, "result_mappings", &r->results, &r->n_results)) {
        return false;
    }
    /* factor sizes `{i=2, j=4}`, in iota order */
    int64_t *sizes = NULL;
    uint32_t n_sizes = 0;
    uint32_t cap = 0;
    if (eat(p, '{') && !eat(p, '}')) {
        for (;;) {
            size_t n = ident_len(p);
            if (n == 0) {
                return fail(p, p->pos, "expected valid keyword");
            }
            const char *w = p->s + p->pos;
            size_t at = p->pos;
            p->pos += n;
            size_t i = 0;
            uint64_t f = 0;
            if (!factor_symbol(p, w, n, &i, at, &f)) {
                return false;
            }
            if (f != n_sizes) {
                char want[32], got[32];
                factor_name(want, sizeof want, n_sizes);
                factor_name(got, sizeof got, f);
                return fail(p, at,
                            "expecting factor indices to be ordered like an iota ([0,1,2,...], "
                            "e.g. {i=#, j=#, ...}). Expecting factor index symbol '%s', "
                            "received: '%s'",
                            want, got);
            }
            if (i < n) {
                return fail(p, at, "expecting single factor symbol: %.*s",
                            (int)(n - i < 64 ? n - i : 64), w + i);
            }
            if (n_sizes >= MAX_FACTORS) {
                return fail(p, at, "a rule may have at most %u factors", MAX_FACTORS);
            }
            int64_t *t = grow(p, sizes, &cap, n_sizes, sizeof *t);
            if (t == NULL) {
                return false;
            }
            sizes = t;
            if (!expect_tok(p, '=')) {
                return false;
            }
            ws(p);
            size_t vat = p->pos;
            if (!parse_int(p, &sizes[n_sizes], "integer value")) {
                return false;
            }
            if (sizes[n_sizes] < 0) {
                return fail(p, vat, "factor size must be non-negative, got %lld",
                            (long long)sizes[n_sizes]);
            }
            n_sizes++;
            if (!eat(p, ',')) {
                break;
            }
        }
        if (!expect_tok(p, '}')) {
            return false;
        }
    }
    /* the special factor lists, in Shardy's order, each optional */
    int64_t *lists[4] = {NULL, NULL, NULL, NULL};
    uint32_t n_list[4] = {0, 0, 0, 0};
    for (int w = 0; w < 4; w++) {
        if (keyword(p, special_names[w]) && !parse_special_list(p, &lists[w], &n_list[w])) {
            return false;
        }
    }
    if (eat(p, ',')) {
        if (!keyword(p, "custom")) {
            return fail(p, p->pos, "expected 'custom'");
        }
        r->is_custom = true;
    }
    if (!expect_tok(p, '>')) {
        return false;
    }
    r->n_factors = n_sizes;
    r->factor_sizes = arr_alloc(p->a, n_sizes, sizeof *r->factor_sizes);
    r->factor_kind = arr_alloc(p->a, n_sizes, sizeof *r->factor_kind);
    r->factor_blocked = arr_alloc(p->a, n_sizes, sizeof *r->factor_blocked);
    if (r->factor_sizes == NULL || r->factor_kind == NULL || r->factor_blocked == NULL) {
        return oom(p);
    }
    if (n_sizes > 0) {
        memcpy(r->factor_sizes, sizes, n_sizes * sizeof *sizes);
    }
    /* the lists folded per factor: in range only, the first kind listed */
    for (int w = 0; w < 4; w++) {
        r->listed[w] = lists[w];
        r->n_listed[w] = n_list[w];
        for (uint32_t k = 0; k < n_list[w]; k++) {
            int64_t f = lists[w][k];
            if (f < 0 || f >= (int64_t)n_sizes) {
                continue;
            }
            if (w == 3) {
                r->factor_blocked[f] = 1;
            } else if (r->factor_kind[f] == SP_FACTOR_PASS_THROUGH) {
                r->factor_kind[f] = (uint8_t)(SP_FACTOR_REDUCTION + w);
            }
        }
    }
    if (p->strict) {
        if (!rule_strict_check(p, r)) {
            return false;
        }
        for (int w = 0; w < 4; w++) {
            r->listed[w] = NULL;
            r->n_listed[w] = 0;
        }
    }
    return true;
}

static cm_status rule_entry(const char *text, size_t len, cm_arena *a, sp_rule **out,
                            size_t *consumed_out, sp_parse_notes *notes, bool strict,
                            cm_error *err)
{
    void *obj = NULL;
    cm_status st = parse_entry_mode(text, len, a, sizeof(sp_rule), parse_rule_body, &obj,
                                    consumed_out, notes, strict, err);
    if (st == CM_OK) {
        *out = obj;
    }
    return st;
}

cm_status sp_rule_parse_ex(const char *text, size_t len, cm_arena *a, sp_rule **out,
                           size_t *consumed_out, sp_parse_notes *notes, cm_error *err)
{
    return rule_entry(text, len, a, out, consumed_out, notes, false, err);
}

cm_status sp_rule_parse(const char *text, size_t len, cm_arena *a, sp_rule **out,
                        size_t *consumed_out, cm_error *err)
{
    return rule_entry(text, len, a, out, consumed_out, NULL, true, err);
}

static void put_tensors(cm_buf *b, const sp_tensor_mapping *t, uint32_t n)
{
    cm_buf_putc(b, '(');
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            cm_buf_puts(b, ", ");
        }
        cm_buf_putc(b, '[');
        for (uint32_t d = 0; d < t[i].rank; d++) {
            const sp_dim_mapping *dm = &t[i].dims[d];
            if (d > 0) {
                cm_buf_puts(b, ", ");
            }
            if (dm->n_factors == 0) {
                cm_buf_putc(b, '*');
            }
            for (uint32_t k = 0; k < dm->n_factors; k++) {
                put_factor(b, dm->factors[k]);
            }
        }
        cm_buf_putc(b, ']');
    }
    cm_buf_putc(b, ')');
}

void sp_rule_print(const sp_rule *r, cm_buf *b)
{
    cm_buf_putc(b, '<');
    put_tensors(b, r->operands, r->n_operands);
    cm_buf_puts(b, "->");
    put_tensors(b, r->results, r->n_results);
    if (r->n_factors > 0) {
        cm_buf_puts(b, " {");
        for (uint32_t f = 0; f < r->n_factors; f++) {
            if (f > 0) {
                cm_buf_puts(b, ", ");
            }
            put_factor(b, f);
            cm_buf_putc(b, '=');
            cm_buf_put_i64(b, r->factor_sizes[f]);
        }
        cm_buf_putc(b, '}');
    }
    for (int w = 0; w < 4; w++) {
        bool first = true;
        for (uint32_t f = 0; f < r->n_factors; f++) {
            bool in = w == 3 ? r->factor_blocked[f] != 0
                             : r->factor_kind[f] == (uint8_t)(SP_FACTOR_REDUCTION + w);
            if (!in) {
                continue;
            }
            if (first) {
                cm_buf_putc(b, ' ');
                cm_buf_puts(b, special_names[w]);
                cm_buf_puts(b, "={");
                first = false;
            } else {
                cm_buf_puts(b, ", ");
            }
            put_factor(b, f);
        }
        if (!first) {
            cm_buf_putc(b, '}');
        }
    }
    if (r->is_custom) {
        cm_buf_puts(b, ", custom");
    }
    cm_buf_putc(b, '>');
}

/* ==== JAX einsum-like rules =============================================== */

/* A factor name in the spec, or a batch dim (`...`), or a `1` dimension. */
typedef struct etok {
    size_t off; /* byte offset in the spec */
    size_t len; /* bytes; "1" for a size-one dimension */
} etok;

typedef struct edim {
    uint32_t first; /* index into toks */
    uint32_t n;     /* 1 unless compound */
    bool compound;
    size_t at;
} edim;

typedef struct espec {
    uint32_t first; /* index into dims */
    uint32_t n;
    bool ell;
    size_t at;
    uint32_t batch; /* dims covered by `...` */
} espec;

typedef struct efac {
    size_t off; /* name in the spec; len 0 for batch and size-one factors */
    size_t len;
    int64_t batch;  /* right-aligned batch position, or -1 */
    int64_t size;   /* -1 while unknown */
    uint32_t stamp; /* last tensor (index + 1) that used it */
} efac;

typedef struct einsum {
    const char *s;
    size_t len;
    cm_error *err;
    etok *toks;
    uint32_t n_toks;
    edim *dims;
    uint32_t n_dims;
    espec *specs;
    uint32_t n_specs;
    efac *facs;
    uint32_t n_facs;
} einsum;

static cm_status efail(einsum *e, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cm_status efail(einsum *e, size_t at, const char *fmt, ...)
{
    char path[40];
    snprintf(path, sizeof path, "col %zu", at + 1);
    va_list ap;
    va_start(ap, fmt);
    cm_error_setv(e->err, CM_EINVAL, path, fmt, ap);
    va_end(ap);
    return CM_EINVAL;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void tensor_name(char *buf, size_t n, uint32_t t, uint32_t n_operands)
{
    if (t < n_operands) {
        snprintf(buf, n, "operand %u", t);
    } else {
        snprintf(buf, n, "result %u", t - n_operands);
    }
}

/* Splits one side (operands or results) of the spec into tensor specs. */
static cm_status lex_side(einsum *e, size_t start, size_t end, uint32_t expected)
{
    bool blank = true;
    for (size_t i = start; i < end; i++) {
        blank = blank && is_space(e->s[i]);
    }
    if (blank && expected == 0) {
        return CM_OK;
    }
    size_t i = start;
    for (;;) {
        espec *sp = &e->specs[e->n_specs++];
        sp->first = e->n_dims;
        sp->n = 0;
        sp->ell = false;
        sp->batch = 0;
        while (i < end && is_space(e->s[i])) {
            i++;
        }
        sp->at = i;
        if (i + 3 <= end && memcmp(e->s + i, "...", 3) == 0) {
            sp->ell = true;
            i += 3;
        }
        for (;;) {
            while (i < end && is_space(e->s[i])) {
                i++;
            }
            if (i >= end || e->s[i] == ',') {
                break;
            }
            char c = e->s[i];
            edim *d = &e->dims[e->n_dims];
            d->first = e->n_toks;
            d->n = 0;
            d->at = i;
            d->compound = false;
            if (sp->n >= MAX_RANK) {
                return efail(e, i, "a tensor may have at most %u dimensions", MAX_RANK);
            }
            if (c == '(') {
                d->compound = true;
                i++;
                for (;;) {
                    while (i < end && is_space(e->s[i])) {
                        i++;
                    }
                    if (i >= end || e->s[i] == ',') {
                        return efail(e, d->at, "'(' is not closed");
                    }
                    if (e->s[i] == ')') {
                        i++;
                        break;
                    }
                    if (e->s[i] == '(') {
                        return efail(e, i, "compound factors cannot be nested");
                    }
                    if (!is_alpha(e->s[i])) {
                        return efail(e, i,
                                     "expected a factor name (a letter, then letters, digits "
                                     "or '_') inside '(...)'");
                    }
                    size_t off = i;
                    while (i < end && (is_alpha(e->s[i]) || is_digit(e->s[i]) || e->s[i] == '_')) {
                        i++;
                    }
                    e->toks[e->n_toks].off = off;
                    e->toks[e->n_toks].len = i - off;
                    e->n_toks++;
                    d->n++;
                }
                if (d->n < 2) {
                    return efail(e, d->at, "a compound factor needs at least two factors");
                }
            } else if (is_alpha(c) || is_digit(c)) {
                size_t off = i;
                while (i < end && (is_alpha(e->s[i]) || is_digit(e->s[i]) || e->s[i] == '_')) {
                    i++;
                }
                if (is_digit(c) && (i - off != 1 || c != '1')) {
                    return efail(e, off,
                                 "factor names must start with a letter; only '1' may stand "
                                 "for a size-1 dimension");
                }
                e->toks[e->n_toks].off = off;
                e->toks[e->n_toks].len = i - off;
                e->n_toks++;
                d->n = 1;
            } else if (c == '.') {
                return efail(e, i,
                             i + 3 <= end && memcmp(e->s + i, "...", 3) == 0
                                 ? "'...' may only start a tensor's dimension list"
                                 : "'.' must be part of '...'");
            } else if (c == ')') {
                return efail(e, i, "')' without '('");
            } else {
                return efail(e, i, "unexpected character '%c'", c);
            }
            e->n_dims++;
            sp->n++;
        }
        if (i >= end) {
            return CM_OK;
        }
        i++; /* ',' */
    }
}

static bool name_eq(const einsum *e, const efac *f, const char *name)
{
    return f->len > 0 && strlen(name) == f->len && memcmp(e->s + f->off, name, f->len) == 0;
}

static efac *find_named(einsum *e, const char *p, size_t len)
{
    for (uint32_t k = 0; k < e->n_facs; k++) {
        efac *f = &e->facs[k];
        if (f->len == len && memcmp(e->s + f->off, p, len) == 0) {
            return f;
        }
    }
    return NULL;
}

static void efac_name(const einsum *e, const efac *f, char *buf, size_t n)
{
    if (f->len > 0) {
        int l = f->len > 64 ? 64 : (int)f->len;
        snprintf(buf, n, "%.*s", l, e->s + f->off);
    } else if (f->batch >= 0) {
        snprintf(buf, n, "batch dimension %lld", (long long)f->batch);
    } else {
        snprintf(buf, n, "1");
    }
}

static efac *new_fac(einsum *e, size_t off, size_t len, int64_t batch, int64_t size)
{
    efac *f = &e->facs[e->n_facs++];
    f->off = off;
    f->len = len;
    f->batch = batch;
    f->size = size;
    f->stamp = 0;
    return f;
}

static cm_status fac_of_tensor(einsum *e, uint32_t t, uint32_t n_operands, efac *f, size_t at)
{
    if (f->stamp == t + 1u) {
        char nb[80];
        char tb[40];
        efac_name(e, f, nb, sizeof nb);
        tensor_name(tb, sizeof tb, t, n_operands);
        return efail(e, at, "factor %s is used twice in %s", nb, tb);
    }
    f->stamp = t + 1u;
    return CM_OK;
}

cm_status sp_rule_from_einsum(const char *spec, const sp_einsum_opts *opts,
                              const int64_t *const *operand_dims, const uint32_t *operand_ranks,
                              uint32_t n_operands, const int64_t *const *result_dims,
                              const uint32_t *result_ranks, uint32_t n_results, cm_arena *a,
                              sp_rule **out, cm_error *err)
{
    static const sp_einsum_opts no_opts = {NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0};
    einsum e;
    memset(&e, 0, sizeof e);
    e.s = spec;
    e.err = err;
    if (opts == NULL) {
        opts = &no_opts;
    }
    if (spec == NULL) {
        return cm_error_set(err, CM_EINVAL, "col 1", "sharding rule string is missing");
    }
    e.len = strlen(spec);
    if (e.len > MAX_EINSUM_LEN) {
        return efail(&e, MAX_EINSUM_LEN, "sharding rule string is longer than %u bytes",
                     MAX_EINSUM_LEN);
    }
    if (n_operands > MAX_TENSORS || n_results > MAX_TENSORS) {
        return cm_error_set(err, CM_EINVAL, "", "at most %u operands and results", MAX_TENSORS);
    }
    /* exactly one "->" */
    size_t arrow = SIZE_MAX;
    for (size_t i = 0; i < e.len; i++) {
        if (spec[i] == '-') {
            if (i + 1 >= e.len || spec[i + 1] != '>') {
                return efail(&e, i, "'-' must be part of '->'");
            }
            if (arrow != SIZE_MAX) {
                return efail(&e, i, "sharding rule must have exactly one '->'");
            }
            arrow = i;
        } else if (spec[i] == '>' && (i == 0 || spec[i - 1] != '-')) {
            return efail(&e, i, "'>' must be part of '->'");
        }
    }
    if (arrow == SIZE_MAX) {
        return efail(&e, e.len, "sharding rule must have exactly one '->'");
    }
    /* every token, dim and spec needs at least one byte, plus one spec per side */
    e.toks = arr_alloc(a, e.len + 1, sizeof *e.toks);
    e.dims = arr_alloc(a, e.len + 1, sizeof *e.dims);
    e.specs = arr_alloc(a, e.len + 2, sizeof *e.specs);
    if (e.toks == NULL || e.dims == NULL || e.specs == NULL) {
        return cm_error_oom(err);
    }
    cm_status st = lex_side(&e, 0, arrow, n_operands);
    if (st != CM_OK) {
        return st;
    }
    uint32_t n_op_specs = e.n_specs;
    if (n_op_specs != n_operands) {
        return efail(&e, 0, "sharding rule has %u operands, but the op has %u", n_op_specs,
                     n_operands);
    }
    st = lex_side(&e, arrow + 2, e.len, n_results);
    if (st != CM_OK) {
        return st;
    }
    if (e.n_specs - n_op_specs != n_results) {
        return efail(&e, arrow + 2, "sharding rule has %u results, but the op has %u",
                     e.n_specs - n_op_specs, n_results);
    }
    /* ranks and batch dims */
    uint32_t n_tensors = e.n_specs;
    uint32_t max_batch = 0;
    for (uint32_t t = 0; t < n_tensors; t++) {
        espec *sp = &e.specs[t];
        bool is_op = t < n_operands;
        uint32_t rank = is_op ? operand_ranks[t] : result_ranks[t - n_operands];
        const int64_t *dims = is_op ? operand_dims[t] : result_dims[t - n_operands];
        char tb[40];
        tensor_name(tb, sizeof tb, t, n_operands);
        if (rank > MAX_RANK) {
            return efail(&e, sp->at, "%s has rank %u; at most %u is supported", tb, rank, MAX_RANK);
        }
        if (rank > 0 && dims == NULL) {
            return efail(&e, sp->at, "%s has rank %u but no shape", tb, rank);
        }
        for (uint32_t j = 0; j < rank; j++) {
            if (dims[j] < 0) {
                return efail(&e, sp->at, "%s dimension %u has unknown size %lld", tb, j,
                             (long long)dims[j]);
            }
        }
        if (sp->ell ? sp->n > rank : sp->n != rank) {
            return efail(&e, sp->at, "sharding rule %s has rank %u%s, but the %s has rank %u", tb,
                         sp->n, sp->ell ? " plus '...'" : "", tb, rank);
        }
        sp->batch = sp->ell ? rank - sp->n : 0;
        max_batch = sp->batch > max_batch ? sp->batch : max_batch;
    }
    /* batch factors are shared by position, so at most max_batch of them */
    e.facs = arr_alloc(a, (size_t)e.n_toks + max_batch + 1, sizeof *e.facs);
    if (e.facs == NULL) {
        return cm_error_oom(err);
    }
    /* user factor sizes: names must be distinct */
    for (uint32_t i = 0; i < opts->n_sizes; i++) {
        char path[48];
        snprintf(path, sizeof path, "/size_names/%u", i);
        if (opts->size_names[i] == NULL || opts->size_names[i][0] == '\0') {
            return cm_error_set(err, CM_EINVAL, path, "factor size has no factor name");
        }
        if (opts->sizes[i] < 0) {
            return cm_error_set(err, CM_EINVAL, path, "factor %s has negative size %lld",
                                opts->size_names[i], (long long)opts->sizes[i]);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(opts->size_names[i], opts->size_names[j]) == 0) {
                return cm_error_set(err, CM_EINVAL, path, "factor %s has two sizes",
                                    opts->size_names[i]);
            }
        }
    }
    /* factors in order of first appearance */
    for (uint32_t t = 0; t < n_tensors; t++) {
        espec *sp = &e.specs[t];
        bool is_op = t < n_operands;
        const int64_t *dims = is_op ? operand_dims[t] : result_dims[t - n_operands];
        for (uint32_t j = 0; j < sp->batch; j++) {
            int64_t key = (int64_t)(max_batch - sp->batch + j);
            efac *f = NULL;
            for (uint32_t k = 0; k < e.n_facs && f == NULL; k++) {
                if (e.facs[k].batch == key) {
                    f = &e.facs[k];
                }
            }
            if (f == NULL) {
                f = new_fac(&e, 0, 0, key, dims[j]);
            } else if (f->size != dims[j]) {
                return efail(&e, sp->at, "batch dimension %lld ('...') has sizes %lld and %lld",
                             (long long)key, (long long)f->size, (long long)dims[j]);
            }
        }
        for (uint32_t di = 0; di < sp->n; di++) {
            edim *d = &e.dims[sp->first + di];
            int64_t dsize = dims[sp->batch + di];
            for (uint32_t k = 0; k < d->n; k++) {
                etok *tk = &e.toks[d->first + k];
                if (tk->len == 1 && e.s[tk->off] == '1') {
                    if (dsize != 1) {
                        return efail(&e, tk->off, "dimension written as 1 has size %lld",
                                     (long long)dsize);
                    }
                    new_fac(&e, 0, 0, -1, 1);
                    continue;
                }
                efac *f = find_named(&e, e.s + tk->off, tk->len);
                if (f == NULL) {
                    int64_t size = -1;
                    for (uint32_t i = 0; i < opts->n_sizes; i++) {
                        if (strlen(opts->size_names[i]) == tk->len &&
                            memcmp(opts->size_names[i], e.s + tk->off, tk->len) == 0) {
                            size = opts->sizes[i];
                        }
                    }
                    f = new_fac(&e, tk->off, tk->len, -1, size);
                }
                st = fac_of_tensor(&e, t, n_operands, f, tk->off);
                if (st != CM_OK) {
                    return st;
                }
                if (!d->compound) {
                    if (f->size < 0) {
                        f->size = dsize;
                    } else if (f->size != dsize) {
                        char nb[80];
                        efac_name(&e, f, nb, sizeof nb);
                        return efail(&e, tk->off, "factor %s has sizes %lld and %lld", nb,
                                     (long long)f->size, (long long)dsize);
                    }
                }
            }
        }
    }
    /* every user size must name a factor of the rule */
    for (uint32_t i = 0; i < opts->n_sizes; i++) {
        if (find_named(&e, opts->size_names[i], strlen(opts->size_names[i])) == NULL) {
            char path[48];
            snprintf(path, sizeof path, "/size_names/%u", i);
            return cm_error_set(err, CM_EINVAL, path, "factor %s is not used in the rule",
                                opts->size_names[i]);
        }
    }
    /* compound dims: infer a single unknown factor, then check products */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t t = 0; t < n_tensors; t++) {
            espec *sp = &e.specs[t];
            const int64_t *dims = t < n_operands ? operand_dims[t] : result_dims[t - n_operands];
            for (uint32_t di = 0; di < sp->n; di++) {
                edim *d = &e.dims[sp->first + di];
                if (!d->compound) {
                    continue;
                }
                int64_t dsize = dims[sp->batch + di];
                int64_t prod = 1;
                uint32_t n_unknown = 0;
                efac *unknown = NULL;
                for (uint32_t k = 0; k < d->n; k++) {
                    etok *tk = &e.toks[d->first + k];
                    efac *f = find_named(&e, e.s + tk->off, tk->len);
                    if (f->size < 0) {
                        n_unknown++;
                        unknown = f;
                    } else if (!cm_mul_i64(prod, f->size, &prod)) {
                        return efail(&e, d->at, "product of factor sizes overflows");
                    }
                }
                if (n_unknown != 1) {
                    continue;
                }
                if (prod == 0 || dsize % prod != 0) {
                    char nb[80];
                    efac_name(&e, unknown, nb, sizeof nb);
                    return efail(&e, d->at,
                                 "cannot infer the size of factor %s: dimension size %lld is "
                                 "not a multiple of the other factors' product %lld",
                                 nb, (long long)dsize, (long long)prod);
                }
                unknown->size = dsize / prod;
                changed = true;
            }
        }
    }
    for (uint32_t t = 0; t < n_tensors; t++) {
        espec *sp = &e.specs[t];
        const int64_t *dims = t < n_operands ? operand_dims[t] : result_dims[t - n_operands];
        for (uint32_t di = 0; di < sp->n; di++) {
            edim *d = &e.dims[sp->first + di];
            if (!d->compound) {
                continue;
            }
            int64_t dsize = dims[sp->batch + di];
            int64_t prod = 1;
            for (uint32_t k = 0; k < d->n; k++) {
                etok *tk = &e.toks[d->first + k];
                efac *f = find_named(&e, e.s + tk->off, tk->len);
                char nb[80];
                efac_name(&e, f, nb, sizeof nb);
                if (f->size < 0) {
                    return efail(&e, tk->off,
                                 "factor %s has no determined size: give it in the factor sizes",
                                 nb);
                }
                if (f->size == 1) {
                    return efail(&e, tk->off,
                                 "factor %s of size 1 cannot be part of a compound "
                                 "dimension",
                                 nb);
                }
                if (!cm_mul_i64(prod, f->size, &prod)) {
                    return efail(&e, d->at, "product of factor sizes overflows");
                }
            }
            if (prod != dsize) {
                return efail(&e, d->at,
                             "compound dimension is expected to have size %lld, but its factors "
                             "multiply to %lld",
                             (long long)dsize, (long long)prod);
            }
        }
    }
    if (e.n_facs > MAX_FACTORS) {
        return efail(&e, 0, "sharding rule has more than %u factors", MAX_FACTORS);
    }
    /* build the rule */
    sp_rule *r = cm_arena_zalloc(a, sizeof *r);
    if (r == NULL) {
        return cm_error_oom(err);
    }
    r->n_factors = e.n_facs;
    r->factor_sizes = arr_alloc(a, e.n_facs, sizeof *r->factor_sizes);
    r->factor_kind = arr_alloc(a, e.n_facs, sizeof *r->factor_kind);
    r->factor_blocked = arr_alloc(a, e.n_facs, sizeof *r->factor_blocked);
    r->operands = arr_alloc(a, n_operands, sizeof *r->operands);
    r->results = arr_alloc(a, n_results, sizeof *r->results);
    if (r->factor_sizes == NULL || r->factor_kind == NULL || r->factor_blocked == NULL ||
        r->operands == NULL || r->results == NULL) {
        return cm_error_oom(err);
    }
    r->n_operands = n_operands;
    r->n_results = n_results;
    for (uint32_t k = 0; k < e.n_facs; k++) {
        r->factor_sizes[k] = e.facs[k].size;
    }
    /* size-one factors are numbered in order too: walk like registration */
    uint32_t next_one = 0;
    for (uint32_t t = 0; t < n_tensors; t++) {
        espec *sp = &e.specs[t];
        sp_tensor_mapping *tm = t < n_operands ? &r->operands[t] : &r->results[t - n_operands];
        tm->rank = sp->batch + sp->n;
        tm->dims = arr_alloc(a, tm->rank, sizeof *tm->dims);
        if (tm->dims == NULL) {
            return cm_error_oom(err);
        }
        for (uint32_t j = 0; j < tm->rank; j++) {
            uint32_t nf = j < sp->batch ? 1u : e.dims[sp->first + j - sp->batch].n;
            tm->dims[j].factors = arr_alloc(a, nf, sizeof(uint32_t));
            if (tm->dims[j].factors == NULL) {
                return cm_error_oom(err);
            }
            tm->dims[j].n_factors = nf;
            if (j < sp->batch) {
                int64_t key = (int64_t)(max_batch - sp->batch + j);
                for (uint32_t k = 0; k < e.n_facs; k++) {
                    if (e.facs[k].batch == key) {
                        tm->dims[j].factors[0] = k;
                    }
                }
                continue;
            }
            edim *d = &e.dims[sp->first + j - sp->batch];
            for (uint32_t k = 0; k < nf; k++) {
                etok *tk = &e.toks[d->first + k];
                if (tk->len == 1 && e.s[tk->off] == '1') {
                    /* the next anonymous size-one factor after next_one */
                    while (e.facs[next_one].len != 0 || e.facs[next_one].batch >= 0) {
                        next_one++;
                    }
                    tm->dims[j].factors[k] = next_one++;
                    continue;
                }
                tm->dims[j].factors[k] =
                    (uint32_t)(find_named(&e, e.s + tk->off, tk->len) - e.facs);
            }
        }
    }
    /* factor kinds */
    const char **lists[3] = {opts->reduction, opts->need_replication, opts->permutation};
    uint32_t n_list[3] = {opts->n_reduction, opts->n_need_replication, opts->n_permutation};
    static const char *const list_names[3] = {"reduction", "need_replication", "permutation"};
    for (int w = 0; w < 3; w++) {
        for (uint32_t i = 0; i < n_list[w]; i++) {
            char path[48];
            snprintf(path, sizeof path, "/%s/%u", list_names[w], i);
            const char *name = lists[w][i];
            uint32_t k = 0;
            while (k < e.n_facs && (name == NULL || !name_eq(&e, &e.facs[k], name))) {
                k++;
            }
            if (k == e.n_facs) {
                return cm_error_set(err, CM_EINVAL, path, "%s factor %s is not in the rule",
                                    list_names[w], name != NULL ? name : "(null)");
            }
            if (r->factor_kind[k] != SP_FACTOR_PASS_THROUGH) {
                return cm_error_set(err, CM_EINVAL, path,
                                    "factor %s is listed more than once in reduction, "
                                    "need_replication and permutation",
                                    name);
            }
            r->factor_kind[k] = (uint8_t)(SP_FACTOR_REDUCTION + w);
        }
    }
    *out = r;
    return CM_OK;
}

/* ---- comparisons the export passes and XLA's unflatten share ---------------- */

bool sp_sharding_same_mesh_ref(const sp_sharding *a, const sp_sharding *b)
{
    if (a->mesh_name != NULL || b->mesh_name != NULL) {
        return a->mesh_name != NULL && b->mesh_name != NULL &&
               strcmp(a->mesh_name, b->mesh_name) == 0;
    }
    return sp_mesh_equal(a->mesh, b->mesh);
}

bool sp_sharding_is_fully_open(const sp_sharding *s)
{
    if (s->n_replicated > 0 || s->n_unreduced > 0) {
        return false;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].is_closed || s->dims[d].n_axes > 0 || s->dims[d].priority >= 0) {
            return false;
        }
    }
    return true;
}

static bool places_no_data(const sp_sharding *s)
{
    if (s == NULL) {
        return true;
    }
    if (s->n_unreduced > 0) {
        return false;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return false;
        }
    }
    return true;
}

static bool axis_refs_equal(const sp_axis_ref *a, uint32_t na, const sp_axis_ref *b, uint32_t nb)
{
    if (na != nb) {
        return false;
    }
    for (uint32_t i = 0; i < na; i++) {
        if (strcmp(a[i].name, b[i].name) != 0 || a[i].pre_size != b[i].pre_size ||
            (a[i].pre_size != 0 && a[i].size != b[i].size)) {
            return false;
        }
    }
    return true;
}

bool sp_sharding_equivalent(const sp_sharding *a, const sp_sharding *b)
{
    if (places_no_data(a)) {
        return places_no_data(b);
    }
    if (b == NULL || !sp_sharding_same_mesh_ref(a, b) || a->rank != b->rank ||
        !axis_refs_equal(a->unreduced, a->n_unreduced, b->unreduced, b->n_unreduced)) {
        return false;
    }
    for (uint32_t d = 0; d < a->rank; d++) {
        if (!axis_refs_equal(a->dims[d].axes, a->dims[d].n_axes, b->dims[d].axes,
                             b->dims[d].n_axes)) {
            return false;
        }
    }
    return true;
}
