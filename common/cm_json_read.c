/* SPDX-License-Identifier: Apache-2.0
 * common: the JSON reader (cm_json.h). One pass over the text with an
 * explicit stack of open containers (no recursion); a container's children
 * collect on two scratch stacks (values, members) and move into the
 * document's blocks when it closes, so every array and object is one
 * contiguous run. Strings are checked in one pass and copied in a second
 * (unescaped only when they hold escapes). Line and column are computed only
 * when an error is reported. The document owns its blocks; the scratch
 * stacks are freed before cm_json_read returns. */
#include "cm_json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- representation --------------------------------------------------------- */

typedef struct member member;

struct cm_json {
    uint32_t kind; /* cm_json_kind */
    uint32_t n;    /* string bytes, array elements, object members */
    union {
        int64_t i;
        double r;
        const char *s;        /* string, NUL-terminated */
        const cm_json *items; /* array */
        const member *mem;    /* object; above SMALL_OBJ followed by its index */
    } u;
};

struct member {
    const char *key;  /* NUL-terminated */
    uint32_t key_len; /* bytes */
    uint32_t at;      /* while reading: the key's offset (saturated), for errors */
    cm_json val;
};

/* Objects of more than SMALL_OBJ members get an index: the member numbers
 * sorted by (key length, key bytes), stored right after the members. */
#define SMALL_OBJ 8u

typedef struct block {
    struct block *next;
    size_t cap;  /* payload bytes */
    size_t used; /* payload bytes handed out */
} block;

struct cm_json_doc {
    block *head;  /* newest block */
    size_t bytes; /* all blocks, headers included */
    size_t next_cap;
    cm_json root;
};

#define BLOCK_MIN ((size_t)4096)
#define BLOCK_MAX ((size_t)8 << 20)

static void *block_data(block *b)
{
    return (char *)b + sizeof(block);
}

static block *block_new(size_t cap)
{
    size_t total;
    if (!cm_add_size(sizeof(block), cap, &total)) {
        return NULL;
    }
    block *b = cm_alloc(total);
    if (b != NULL) {
        b->next = NULL;
        b->cap = cap;
        b->used = 0;
    }
    return b;
}

/* size bytes aligned to align (1 or 8) from the document's blocks. */
static void *doc_alloc(cm_json_doc *d, size_t size, size_t align)
{
    block *b = d->head;
    size_t at = (b->used + align - 1) & ~(align - 1);
    if (at <= b->cap && b->cap - at >= size) {
        b->used = at + size;
        return (char *)block_data(b) + at;
    }
    size_t cap = d->next_cap;
    if (size > cap / 4) {
        cap = size; /* a big run gets its own block, behind the head */
    } else if (d->next_cap < BLOCK_MAX) {
        d->next_cap *= 2;
    }
    block *n = block_new(cap);
    if (n == NULL) {
        return NULL;
    }
    d->bytes += sizeof(block) + cap;
    if (cap == size) {
        n->next = b->next;
        b->next = n;
    } else {
        n->next = b;
        d->head = n;
    }
    n->used = size;
    return block_data(n);
}

/* ---- parser state ------------------------------------------------------------ */

typedef struct frame {
    uint32_t is_obj;
    size_t start; /* first scratch slot of this container's children */
    size_t at;    /* offset of its '[' or '{' */
} frame;

typedef struct parser {
    const unsigned char *p, *end, *text;
    cm_json_doc *doc;
    cm_json_read_error *err;
    cm_status st;
    cm_json *vals; /* scratch: elements of open arrays */
    size_t n_vals, cap_vals;
    member *mems; /* scratch: members of open objects */
    size_t n_mems, cap_mems;
    uint32_t *tmp; /* scratch for the index sort */
    size_t cap_tmp;
    size_t depth;
    frame frames[CM_JSON_MAX_DEPTH];
} parser;

static cm_status fail_at(parser *ps, size_t off, cm_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static cm_status fail_at(parser *ps, size_t off, cm_status code, const char *fmt, ...)
{
    if (ps->st != CM_OK) {
        return ps->st;
    }
    ps->st = code;
    cm_json_read_error *e = ps->err;
    if (e == NULL) {
        return code;
    }
    size_t line = 1, col_start = 0;
    for (size_t i = 0; i < off; i++) {
        if (ps->text[i] == '\n') {
            line++;
            col_start = i + 1;
        }
    }
    e->code = code;
    e->line = line;
    e->column = off - col_start + 1;
    e->offset = off;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

static size_t here(const parser *ps, const unsigned char *q)
{
    return (size_t)(q - ps->text);
}

static cm_status fail(parser *ps, const unsigned char *q, const char *msg)
{
    return fail_at(ps, here(ps, q), CM_EINVAL, "%s", msg);
}

static cm_status oom(parser *ps, const unsigned char *q)
{
    return fail_at(ps, here(ps, q), CM_ENOMEM, "out of memory");
}

static cm_status eof_or(parser *ps, const unsigned char *q, const char *msg)
{
    return fail(ps, q, q >= ps->end ? "unexpected end of input" : msg);
}

/* Grows a scratch stack to hold need items. */
static bool grow(void **items, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return true;
    }
    size_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) {
            return false;
        }
        nc *= 2;
    }
    size_t bytes;
    if (!cm_mul_size(nc, elem, &bytes)) {
        return false;
    }
    void *n = cm_realloc(*items, bytes);
    if (n == NULL) {
        return false;
    }
    *items = n;
    *cap = nc;
    return true;
}

/* ---- character classes ------------------------------------------------------- */

/* 1: whitespace. */
static const unsigned char ws_tab[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

/* 1: a byte a string holds as it is (printable ASCII but '"' and '\'). */
/* clang-format off */
static const unsigned char plain_tab[256] = {
#define R16(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
    R16(0), R16(0),                                         /* 0x00-0x1f */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,         /* 0x20-0x2f: '"' */
    R16(1), R16(1),                                         /* 0x30-0x4f */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,         /* 0x50-0x5f: '\\' */
    R16(1), R16(1),                                         /* 0x60-0x7f */
    /* 0x80-0xff: 0 */
#undef R16
};
/* clang-format on */

static const unsigned char *skip_ws(const unsigned char *p, const unsigned char *end)
{
    while (p < end && ws_tab[*p]) {
        p++;
    }
    return p;
}

/* The four hex digits at q (q + 4 <= end), or -1. */
static long hex4(const unsigned char *q)
{
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = cm_hex_digit(q[k]);
        if (h < 0) {
            return -1;
        }
        v = v * 16 + h;
    }
    return v;
}

/* Length of the well-formed UTF-8 sequence starting at q (a byte >= 0x80),
 * or 0 when it is ill-formed or cut short by end. */
static size_t utf8_len(const unsigned char *q, const unsigned char *end)
{
    unsigned char c = q[0];
    size_t n = (size_t)(end - q);
    unsigned char lo = 0x80, hi = 0xbf;
    size_t len;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) {
            lo = 0xa0;
        } else if (c == 0xed) {
            hi = 0x9f; /* U+D800-U+DFFF are surrogates */
        }
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) {
            lo = 0x90;
        } else if (c == 0xf4) {
            hi = 0x8f; /* nothing above U+10FFFF */
        }
    } else {
        return 0;
    }
    if (n < len || q[1] < lo || q[1] > hi) {
        return 0;
    }
    for (size_t k = 2; k < len; k++) {
        if (q[k] < 0x80 || q[k] > 0xbf) {
            return 0;
        }
    }
    return len;
}

static size_t put_utf8(unsigned char *o, unsigned long cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* ---- strings ----------------------------------------------------------------- */

/* Reads the string whose opening quote is at ps->p: checks it, copies it
 * (unescaped, NUL-terminated) into the document, leaves ps->p after the
 * closing quote. */
static cm_status read_string(parser *ps, const char **s_out, uint32_t *len_out)
{
    const unsigned char *start = ps->p + 1, *q = start, *end = ps->end;
    bool escaped = false;
    for (;;) {
        while (q < end && plain_tab[*q]) {
            q++;
        }
        if (q >= end) {
            return fail(ps, q, "unexpected end of input in a string");
        }
        unsigned char c = *q;
        if (c == '"') {
            break;
        }
        if (c >= 0x80) {
            size_t n = utf8_len(q, end);
            if (n == 0) {
                return fail(ps, q, "invalid UTF-8 in string");
            }
            q += n;
            continue;
        }
        if (c < 0x20) {
            return fail(ps, q, "control character in string (escape it)");
        }
        /* a backslash */
        escaped = true;
        if (end - q < 2) {
            return fail(ps, q + 1, "unexpected end of input in a string");
        }
        unsigned char e = q[1];
        if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
            e == 't') {
            q += 2;
            continue;
        }
        if (e != 'u') {
            return fail(ps, q, "invalid escape in string");
        }
        if (end - q < 6) {
            return fail(ps, end, "unexpected end of input in a string");
        }
        long cp = hex4(q + 2);
        if (cp < 0) {
            return fail(ps, q, "invalid \\u escape in string (four hex digits expected)");
        }
        if (cp == 0) {
            return fail(ps, q, "\\u0000 is not allowed in a string");
        }
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            return fail(ps, q, "lone low surrogate \\u escape in string");
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (end - q < 12 || q[6] != '\\' || q[7] != 'u') {
                return fail(ps, q, "high surrogate \\u escape not followed by a low one");
            }
            long lo = hex4(q + 8);
            if (lo < 0xdc00 || lo > 0xdfff) {
                return fail(ps, q, "high surrogate \\u escape not followed by a low one");
            }
            q += 12; /* a pair: 12 raw bytes become 4 */
            continue;
        }
        q += 6; /* 6 raw bytes become 1-3 */
    }
    size_t raw = (size_t)(q - start);
    if (raw > UINT32_MAX - 1) {
        return fail(ps, start - 1, "string longer than 4 GiB");
    }
    unsigned char *o = doc_alloc(ps->doc, raw + 1, 1);
    if (o == NULL) {
        return oom(ps, start - 1);
    }
    size_t n;
    if (!escaped) {
        memcpy(o, start, raw);
        n = raw;
    } else {
        n = 0;
        for (const unsigned char *r = start; r < q;) {
            if (*r != '\\') {
                o[n++] = *r++;
                continue;
            }
            unsigned char e = r[1];
            r += 2;
            switch (e) {
            case 'b':
                o[n++] = '\b';
                break;
            case 'f':
                o[n++] = '\f';
                break;
            case 'n':
                o[n++] = '\n';
                break;
            case 'r':
                o[n++] = '\r';
                break;
            case 't':
                o[n++] = '\t';
                break;
            case 'u': {
                unsigned long cp = (unsigned long)hex4(r);
                r += 4;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    unsigned long lo = (unsigned long)hex4(r + 2);
                    r += 6;
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                n += put_utf8(o + n, cp);
                break;
            }
            default: /* '"', '\\', '/' */
                o[n++] = e;
                break;
            }
        }
    }
    o[n] = '\0';
    *s_out = (const char *)o;
    *len_out = (uint32_t)n;
    ps->p = q + 1;
    return CM_OK;
}

/* ---- numbers ----------------------------------------------------------------- */

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static cm_status read_number(parser *ps, cm_json *v)
{
    const unsigned char *start = ps->p, *q = start, *end = ps->end;
    bool neg = false;
    if (*q == '-') {
        neg = true;
        q++;
    }
    if (q >= end || !is_digit(*q)) {
        return eof_or(ps, q, "invalid number (a digit expected)");
    }
    uint64_t mag = 0;
    bool big = false;
    if (*q == '0') {
        q++;
        if (q < end && is_digit(*q)) {
            return fail(ps, q - 1, "leading zero in a number");
        }
    } else {
        while (q < end && is_digit(*q)) {
            unsigned d = (unsigned)(*q - '0');
            if (mag > (UINT64_MAX - d) / 10) {
                big = true;
            } else {
                mag = mag * 10 + d;
            }
            q++;
        }
    }
    bool is_real = false;
    if (q < end && *q == '.') {
        is_real = true;
        q++;
        if (q >= end || !is_digit(*q)) {
            return eof_or(ps, q, "invalid number (a digit expected after '.')");
        }
        while (q < end && is_digit(*q)) {
            q++;
        }
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        is_real = true;
        q++;
        if (q < end && (*q == '+' || *q == '-')) {
            q++;
        }
        if (q >= end || !is_digit(*q)) {
            return eof_or(ps, q, "invalid number (a digit expected in the exponent)");
        }
        while (q < end && is_digit(*q)) {
            q++;
        }
    }
    ps->p = q;
    if (!is_real) {
        if (big || mag > (neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX)) {
            return fail(ps, start, "integer out of the int64 range");
        }
        v->kind = CM_JSON_INT;
        v->n = 0;
        v->u.i = neg ? (mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
        return CM_OK;
    }
    /* strtod needs a NUL-terminated copy; the grammar was checked above, so
     * it reads exactly these bytes */
    size_t n = (size_t)(q - start);
    char small[64];
    char *buf = small;
    if (n >= sizeof small) {
        buf = cm_alloc(n + 1);
        if (buf == NULL) {
            return oom(ps, start);
        }
    }
    memcpy(buf, start, n);
    buf[n] = '\0';
    errno = 0;
    double d = strtod(buf, NULL);
    bool over = errno == ERANGE && isinf(d);
    if (buf != small) {
        cm_free(buf);
    }
    if (over) {
        return fail(ps, start, "real number out of range");
    }
    v->kind = CM_JSON_REAL;
    v->n = 0;
    v->u.r = d;
    return CM_OK;
}

/* ---- objects ------------------------------------------------------------------ */

static int key_cmp(const member *a, const member *b)
{
    if (a->key_len != b->key_len) {
        return a->key_len < b->key_len ? -1 : 1;
    }
    return memcmp(a->key, b->key, a->key_len);
}

/* Sorts idx[0..n) by key (merge sort through tmp; stable). */
static void sort_idx(const member *m, uint32_t *idx, uint32_t *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                tmp[k++] = key_cmp(&m[idx[j]], &m[idx[i]]) < 0 ? idx[j++] : idx[i++];
            }
            while (i < mid) {
                tmp[k++] = idx[i++];
            }
            while (j < hi) {
                tmp[k++] = idx[j++];
            }
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
}

/* Writes key (valid UTF-8) into out escaped as a JSON string body, cut at
 * about 40 bytes on a character boundary. */
static void quote_key(char *out, size_t cap, const char *key, size_t len)
{
    size_t o = 0, lim = len > 40 ? 40 : len;
    size_t i = 0;
    for (; i < lim && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)key[i];
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    /* finish a character cut in the middle */
    while (i < len && ((unsigned char)key[i] & 0xc0) == 0x80 && o + 5 < cap) {
        out[o++] = key[i++];
    }
    if (i < len && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static cm_status dup_key(parser *ps, const member *m)
{
    char q[200];
    quote_key(q, sizeof q, m->key, m->key_len);
    return fail_at(ps, m->at == UINT32_MAX ? 0 : m->at, CM_EINVAL, "duplicate key \"%s\"", q);
}

/* Closes the object whose members are mems[start..n_mems). */
static cm_status close_object(parser *ps, size_t start, cm_json *v)
{
    size_t n = ps->n_mems - start;
    member *src = ps->mems + start;
    if (n > UINT32_MAX - 1) {
        return fail(ps, ps->p, "object with more than 4G members");
    }
    size_t bytes = n * sizeof(member);
    if (n > SMALL_OBJ) {
        bytes += n * sizeof(uint32_t);
    }
    member *m = n > 0 ? doc_alloc(ps->doc, bytes, 8) : NULL;
    if (n > 0 && m == NULL) {
        return oom(ps, ps->p);
    }
    if (n > 0) {
        memcpy(m, src, n * sizeof(member));
    }
    if (n > SMALL_OBJ) {
        uint32_t *idx = (uint32_t *)(void *)(m + n);
        if (!grow((void **)&ps->tmp, &ps->cap_tmp, n, sizeof(uint32_t))) {
            return oom(ps, ps->p);
        }
        for (size_t i = 0; i < n; i++) {
            idx[i] = (uint32_t)i;
        }
        sort_idx(m, idx, ps->tmp, n);
        /* stable: of equal keys the later one in the document comes second */
        const member *dup = NULL;
        for (size_t i = 1; i < n; i++) {
            if (key_cmp(&m[idx[i - 1]], &m[idx[i]]) == 0 &&
                (dup == NULL || m[idx[i]].at < dup->at)) {
                dup = &m[idx[i]];
            }
        }
        if (dup != NULL) {
            return dup_key(ps, dup);
        }
    }
    ps->n_mems = start;
    v->kind = CM_JSON_OBJECT;
    v->n = (uint32_t)n;
    v->u.mem = m;
    return CM_OK;
}

static cm_status close_array(parser *ps, size_t start, cm_json *v)
{
    size_t n = ps->n_vals - start;
    if (n > UINT32_MAX - 1) {
        return fail(ps, ps->p, "array with more than 4G elements");
    }
    cm_json *items = NULL;
    if (n > 0) {
        items = doc_alloc(ps->doc, n * sizeof(cm_json), 8);
        if (items == NULL) {
            return oom(ps, ps->p);
        }
        memcpy(items, ps->vals + start, n * sizeof(cm_json));
    }
    ps->n_vals = start;
    v->kind = CM_JSON_ARRAY;
    v->n = (uint32_t)n;
    v->u.items = items;
    return CM_OK;
}

/* ---- the parse loop ----------------------------------------------------------- */

static bool literal(parser *ps, const char *word, size_t n)
{
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
        return false;
    }
    ps->p += n;
    return true;
}

/* Reads a key and its ':' into a new member of the innermost object. */
static cm_status read_key(parser *ps)
{
    const unsigned char *kq = ps->p;
    if (kq >= ps->end || *kq != '"') {
        return eof_or(ps, kq, "expected a string key");
    }
    if (!grow((void **)&ps->mems, &ps->cap_mems, ps->n_mems + 1, sizeof(member))) {
        return oom(ps, kq);
    }
    member *m = &ps->mems[ps->n_mems];
    if (read_string(ps, &m->key, &m->key_len) != CM_OK) {
        return ps->st;
    }
    size_t off = here(ps, kq);
    m->at = off < UINT32_MAX ? (uint32_t)off : UINT32_MAX;
    /* a small object checks each key as it comes; a big one when it closes */
    const frame *f = &ps->frames[ps->depth - 1];
    size_t n = ps->n_mems - f->start;
    if (n < SMALL_OBJ) {
        for (size_t i = f->start; i < ps->n_mems; i++) {
            if (key_cmp(&ps->mems[i], m) == 0) {
                return dup_key(ps, m);
            }
        }
    }
    ps->n_mems++;
    ps->p = skip_ws(ps->p, ps->end);
    if (ps->p >= ps->end || *ps->p != ':') {
        return eof_or(ps, ps->p, "expected ':' after an object key");
    }
    ps->p = skip_ws(ps->p + 1, ps->end);
    return CM_OK;
}

/* Where a finished value goes: the innermost container, or the root. */
static cm_status store(parser *ps, const cm_json *v)
{
    if (ps->depth == 0) {
        ps->doc->root = *v;
        return CM_OK;
    }
    if (ps->frames[ps->depth - 1].is_obj) {
        ps->mems[ps->n_mems - 1].val = *v;
        return CM_OK;
    }
    if (!grow((void **)&ps->vals, &ps->cap_vals, ps->n_vals + 1, sizeof(cm_json))) {
        return oom(ps, ps->p);
    }
    ps->vals[ps->n_vals++] = *v;
    return CM_OK;
}

static cm_status parse(parser *ps)
{
    ps->p = skip_ws(ps->p, ps->end);
    for (;;) {
        /* a value is due at ps->p */
        const unsigned char *q = ps->p;
        if (q >= ps->end) {
            return fail(ps, q, "unexpected end of input");
        }
        cm_json v;
        switch (*q) {
        case '{':
        case '[': {
            if (ps->depth == CM_JSON_MAX_DEPTH) {
                return fail(ps, q, "nesting deeper than 512 arrays and objects");
            }
            bool obj = *q == '{';
            frame *f = &ps->frames[ps->depth++];
            f->is_obj = obj;
            f->start = obj ? ps->n_mems : ps->n_vals;
            f->at = here(ps, q);
            ps->p = skip_ws(q + 1, ps->end);
            if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
                ps->p++;
                ps->depth--;
                if (obj) {
                    v = (cm_json){.kind = CM_JSON_OBJECT};
                } else {
                    v = (cm_json){.kind = CM_JSON_ARRAY};
                }
                break;
            }
            if (obj && read_key(ps) != CM_OK) {
                return ps->st;
            }
            continue;
        }
        case '"': {
            const char *s;
            uint32_t n;
            if (read_string(ps, &s, &n) != CM_OK) {
                return ps->st;
            }
            v = (cm_json){.kind = CM_JSON_STRING, .n = n, .u.s = s};
            break;
        }
        case 't':
            if (!literal(ps, "true", 4)) {
                return fail(ps, q, "invalid literal (true expected)");
            }
            v = (cm_json){.kind = CM_JSON_TRUE};
            break;
        case 'f':
            if (!literal(ps, "false", 5)) {
                return fail(ps, q, "invalid literal (false expected)");
            }
            v = (cm_json){.kind = CM_JSON_FALSE};
            break;
        case 'n':
            if (!literal(ps, "null", 4)) {
                return fail(ps, q, "invalid literal (null expected)");
            }
            v = (cm_json){.kind = CM_JSON_NULL};
            break;
        default:
            if (*q == '-' || is_digit(*q)) {
                if (read_number(ps, &v) != CM_OK) {
                    return ps->st;
                }
                break;
            }
            if (ps->depth > 0 && *q == (ps->frames[ps->depth - 1].is_obj ? '}' : ']')) {
                return fail(ps, q, "expected a value (trailing comma?)");
            }
            return fail(ps, q, "expected a value");
        }
        /* v is complete: store it, then close containers as they end */
        for (;;) {
            if (store(ps, &v) != CM_OK) {
                return ps->st;
            }
            if (ps->depth == 0) {
                ps->p = skip_ws(ps->p, ps->end);
                if (ps->p < ps->end) {
                    return fail(ps, ps->p, "trailing characters after the document");
                }
                return CM_OK;
            }
            frame *f = &ps->frames[ps->depth - 1];
            ps->p = skip_ws(ps->p, ps->end);
            unsigned char close = f->is_obj ? '}' : ']';
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p = skip_ws(ps->p + 1, ps->end);
                if (f->is_obj && read_key(ps) != CM_OK) {
                    return ps->st;
                }
                break; /* the next value */
            }
            if (ps->p >= ps->end || *ps->p != close) {
                return eof_or(ps, ps->p, f->is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
            }
            if ((f->is_obj ? close_object(ps, f->start, &v) : close_array(ps, f->start, &v)) !=
                CM_OK) {
                return ps->st;
            }
            ps->p++;
            ps->depth--;
        }
    }
}

cm_status cm_json_read(const char *text, size_t len, cm_json_doc **doc_out, cm_json_read_error *err)
{
    *doc_out = NULL;
    if (err != NULL) {
        memset(err, 0, sizeof *err);
    }
    /* the first block takes a small document's whole tree (about 2x its
     * text); bigger ones grow block by block */
    size_t first = len < BLOCK_MIN / 2 ? BLOCK_MIN : len < BLOCK_MAX / 2 ? 2 * len : BLOCK_MAX;
    block *b = block_new(first);
    parser *ps = cm_alloc(sizeof *ps);
    if (b == NULL || ps == NULL) {
        cm_free(b);
        cm_free(ps);
        if (err != NULL) {
            err->code = CM_ENOMEM;
            err->line = 1;
            err->column = 1;
            snprintf(err->msg, sizeof err->msg, "out of memory");
        }
        return CM_ENOMEM;
    }
    cm_json_doc *doc = block_data(b);
    b->used = sizeof *doc;
    doc->head = b;
    doc->bytes = sizeof(block) + first;
    doc->next_cap = first < BLOCK_MAX ? first * 2 : BLOCK_MAX;
    doc->root = (cm_json){.kind = CM_JSON_NULL};
    memset(ps, 0, offsetof(parser, frames));
    ps->text = (const unsigned char *)(text != NULL ? text : ""); /* NULL with len 0 */
    ps->p = ps->text;
    ps->end = ps->text + len;
    ps->doc = doc;
    ps->err = err;
    cm_status st = parse(ps);
    cm_free(ps->vals);
    cm_free(ps->mems);
    cm_free(ps->tmp);
    cm_free(ps);
    if (st != CM_OK) {
        cm_json_doc_destroy(doc);
        return st;
    }
    *doc_out = doc;
    return CM_OK;
}

void cm_json_doc_destroy(cm_json_doc *doc)
{
    if (doc == NULL) {
        return;
    }
    /* the document itself lives in its oldest block: free that one last */
    block *b = doc->head;
    while (b != NULL) {
        block *next = b->next;
        cm_free(b);
        b = next;
    }
}

const cm_json *cm_json_doc_root(const cm_json_doc *doc)
{
    return &doc->root;
}

size_t cm_json_doc_bytes(const cm_json_doc *doc)
{
    return doc->bytes;
}

/* ---- accessors ------------------------------------------------------------------ */

cm_json_kind cm_json_kind_of(const cm_json *v)
{
    return v != NULL ? (cm_json_kind)v->kind : CM_JSON_NULL;
}

bool cm_json_is_null(const cm_json *v)
{
    return v != NULL && v->kind == CM_JSON_NULL;
}

bool cm_json_is_bool(const cm_json *v)
{
    return v != NULL && (v->kind == CM_JSON_TRUE || v->kind == CM_JSON_FALSE);
}

bool cm_json_is_true(const cm_json *v)
{
    return v != NULL && v->kind == CM_JSON_TRUE;
}

bool cm_json_is_int(const cm_json *v)
{
    return v != NULL && v->kind == CM_JSON_INT;
}

bool cm_json_is_real(const cm_json *v)
{
    return v != NULL && v->kind == CM_JSON_REAL;
}

bool cm_json_is_string(const cm_json *v)
{
    return v != NULL && v->kind == CM_JSON_STRING;
}

bool cm_json_is_array(const cm_json *v)
{
    return v != NULL && v->kind == CM_JSON_ARRAY;
}

bool cm_json_is_object(const cm_json *v)
{
    return v != NULL && v->kind == CM_JSON_OBJECT;
}

int64_t cm_json_int(const cm_json *v)
{
    return cm_json_is_int(v) ? v->u.i : 0;
}

double cm_json_real(const cm_json *v)
{
    if (cm_json_is_real(v)) {
        return v->u.r;
    }
    return cm_json_is_int(v) ? (double)v->u.i : 0.0;
}

const char *cm_json_str(const cm_json *v)
{
    return cm_json_is_string(v) ? v->u.s : NULL;
}

size_t cm_json_str_len(const cm_json *v)
{
    return cm_json_is_string(v) ? v->n : 0;
}

size_t cm_json_size(const cm_json *v)
{
    return cm_json_is_array(v) || cm_json_is_object(v) ? v->n : 0;
}

const cm_json *cm_json_at(const cm_json *a, size_t i)
{
    return cm_json_is_array(a) && i < a->n ? &a->u.items[i] : NULL;
}

const cm_json *cm_json_getn(const cm_json *o, const char *key, size_t key_len)
{
    if (!cm_json_is_object(o) || key_len > UINT32_MAX) {
        return NULL;
    }
    const member *m = o->u.mem;
    size_t n = o->n;
    if (n <= SMALL_OBJ) {
        for (size_t i = 0; i < n; i++) {
            if (m[i].key_len == key_len && memcmp(m[i].key, key, key_len) == 0) {
                return &m[i].val;
            }
        }
        return NULL;
    }
    const uint32_t *idx = (const uint32_t *)(const void *)(m + n);
    member probe = {.key = key, .key_len = (uint32_t)key_len};
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = key_cmp(&m[idx[mid]], &probe);
        if (c == 0) {
            return &m[idx[mid]].val;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

const cm_json *cm_json_get(const cm_json *o, const char *key)
{
    return cm_json_getn(o, key, strlen(key));
}

const char *cm_json_key_at(const cm_json *o, size_t i, size_t *len_out)
{
    if (!cm_json_is_object(o) || i >= o->n) {
        return NULL;
    }
    if (len_out != NULL) {
        *len_out = o->u.mem[i].key_len;
    }
    return o->u.mem[i].key;
}

const cm_json *cm_json_val_at(const cm_json *o, size_t i)
{
    return cm_json_is_object(o) && i < o->n ? &o->u.mem[i].val : NULL;
}

void cm_json_put_value(cm_buf *b, const cm_json *v)
{
    switch (cm_json_kind_of(v)) {
    case CM_JSON_NULL:
        cm_json_put_null(b);
        break;
    case CM_JSON_FALSE:
        cm_json_put_bool(b, false);
        break;
    case CM_JSON_TRUE:
        cm_json_put_bool(b, true);
        break;
    case CM_JSON_INT:
        cm_json_put_i64(b, v->u.i);
        break;
    case CM_JSON_REAL:
        cm_json_put_f64(b, v->u.r);
        break;
    case CM_JSON_STRING:
        cm_json_put_str(b, v->u.s, v->n);
        break;
    case CM_JSON_ARRAY:
        cm_buf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i > 0) {
                cm_buf_putc(b, ',');
            }
            cm_json_put_value(b, &v->u.items[i]);
        }
        cm_buf_putc(b, ']');
        break;
    case CM_JSON_OBJECT:
        cm_buf_putc(b, '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i > 0) {
                cm_buf_putc(b, ',');
            }
            cm_json_put_str(b, v->u.mem[i].key, v->u.mem[i].key_len);
            cm_buf_putc(b, ':');
            cm_json_put_value(b, &v->u.mem[i].val);
        }
        cm_buf_putc(b, '}');
        break;
    }
}
