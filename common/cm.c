/* SPDX-License-Identifier: Apache-2.0
 * common: implementation of status/error reporting, the allocator hook,
 * array growth, arenas, buffers and small OS helpers. */
#include "cm.h"

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cm_json.h"

void cm_error_clear(cm_error *err)
{
    if (err == NULL) {
        return;
    }
    err->code = CM_OK;
    err->path[0] = '\0';
    err->msg[0] = '\0';
}

cm_status cm_error_setv(cm_error *err, cm_status code, const char *path, const char *fmt,
                        va_list ap)
{
    if (err == NULL || err->code != CM_OK) {
        return code;
    }
    err->code = code;
    snprintf(err->path, sizeof err->path, "%s", path != NULL ? path : "");
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

cm_status cm_error_set(cm_error *err, cm_status code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cm_error_setv(err, code, path, fmt, ap);
    va_end(ap);
    return code;
}

cm_status cm_error_oom(cm_error *err)
{
    return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
}

/* Appends s to the len bytes of text in buf (cap bytes), truncating so the
 * NUL still fits; returns the new length. */
static size_t append_trunc(char *buf, size_t cap, size_t len, const char *s)
{
    size_t n = strlen(s);
    if (n > cap - 1 - len) {
        n = cap - 1 - len;
    }
    memcpy(buf + len, s, n);
    buf[len + n] = '\0';
    return len + n;
}

cm_status cm_error_wrap(cm_error *err, const cm_error *inner, const char *fmt, ...)
{
    bool has_inner = inner != NULL && inner->code != CM_OK;
    cm_status code = has_inner ? inner->code : CM_EINTERNAL;
    if (err == NULL || err->code != CM_OK) {
        return code;
    }
    /* built in a local buffer and copied at the end, so the arguments may
     * point into inner (or into err itself) */
    char msg[CM_ERROR_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    msg[len] = '\0';
    const char *tail = has_inner ? inner->msg : "unreported error";
    if (tail[0] != '\0') {
        if (len > 0) {
            len = append_trunc(msg, sizeof msg, len, ": ");
        }
        append_trunc(msg, sizeof msg, len, tail);
    }
    err->code = code;
    snprintf(err->path, sizeof err->path, "%s", has_inner ? inner->path : "");
    memcpy(err->msg, msg, sizeof msg);
    return code;
}

const char *cm_status_name(cm_status code)
{
    switch (code) {
    case CM_OK:
        return "ok";
    case CM_EINVAL:
        return "invalid";
    case CM_ENOTFOUND:
        return "not found";
    case CM_ECONFLICT:
        return "conflict";
    case CM_ENOMEM:
        return "out of memory";
    case CM_EIO:
        return "i/o error";
    case CM_EINTERNAL:
        return "internal error";
    }
    return "unknown";
}

/* ---- allocation ---------------------------------------------------------- */

/* Test hook: the number of allocations left before one fails; <0 = never.
 * Documented exception to "no mutable globals": a test-only switch. Atomic
 * because the executor's and the server's worker threads allocate while a
 * test arms it; relaxed order is enough, as it orders nothing else. */
static _Atomic long fail_countdown = -1;

void cm_alloc_fail_after(long n)
{
    atomic_store_explicit(&fail_countdown, n, memory_order_relaxed);
}

bool cm_tune_malloc(void)
{
    bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
    return mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1 && ok;
}

/* One step of the countdown: n > 0 becomes n - 1, 0 becomes -1 and fails
 * this allocation, a negative value stays. The compare-exchange makes the
 * step one transition, so two threads never both take the failure. */
static bool should_fail(void)
{
    long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    while (n >= 0) {
        if (atomic_compare_exchange_weak_explicit(&fail_countdown, &n, n == 0 ? -1 : n - 1,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            return n == 0;
        }
    }
    return false;
}

void *cm_alloc(size_t size)
{
    if (should_fail()) {
        return NULL;
    }
    return malloc(size == 0 ? 1 : size);
}

void *cm_calloc(size_t n, size_t size)
{
    if (should_fail()) {
        return NULL;
    }
    return calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
}

void *cm_realloc(void *p, size_t size)
{
    if (should_fail()) {
        return NULL;
    }
    return realloc(p, size == 0 ? 1 : size);
}

void cm_free(void *p)
{
    free(p);
}

/* The capacity cm_grow moves to: doubling from 16 until need is reached, or
 * need itself when doubling would pass limit. */
static size_t grown_cap(size_t cap, size_t need, size_t limit)
{
    size_t ncap = cap < 16 ? 16 : cap;
    while (ncap < need) {
        if (ncap > limit / 2) {
            return need;
        }
        ncap *= 2;
    }
    return ncap > limit ? need : ncap;
}

/* Reallocates the array whose pointer is at items to ncap elements. The
 * pointer is read and written with memcpy: the caller's object has its own
 * pointer type, not void *. */
static cm_status realloc_items(void **items, size_t ncap, size_t elem, cm_error *err)
{
    size_t bytes;
    if (!cm_mul_size(ncap, elem, &bytes)) {
        return cm_error_oom(err);
    }
    void *old;
    memcpy(&old, items, sizeof old);
    void *p = cm_realloc(old, bytes);
    if (p == NULL) {
        return cm_error_oom(err);
    }
    memcpy(items, &p, sizeof p);
    return CM_OK;
}

cm_status cm_grow(void **items, size_t *cap, size_t need, size_t elem, cm_error *err)
{
    if (need <= *cap) {
        return CM_OK;
    }
    size_t limit = elem == 0 ? SIZE_MAX : SIZE_MAX / elem;
    if (need > limit) {
        return cm_error_oom(err);
    }
    size_t ncap = grown_cap(*cap, need, limit);
    cm_status st = realloc_items(items, ncap, elem, err);
    if (st == CM_OK) {
        *cap = ncap;
    }
    return st;
}

cm_status cm_grow_u32(void **items, uint32_t *cap, uint32_t need, size_t elem, cm_error *err)
{
    if (need <= *cap) {
        return CM_OK;
    }
    size_t limit = UINT32_MAX - 1u;
    if (elem != 0 && SIZE_MAX / elem < limit) {
        limit = SIZE_MAX / elem;
    }
    if (need > limit) {
        return cm_error_oom(err);
    }
    size_t ncap = grown_cap(*cap, need, limit);
    cm_status st = realloc_items(items, ncap, elem, err);
    if (st == CM_OK) {
        *cap = (uint32_t)ncap;
    }
    return st;
}

bool cm_mul_size(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        return false;
    }
    *out = r;
    return true;
}

bool cm_add_size(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        return false;
    }
    *out = r;
    return true;
}

bool cm_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        return false;
    }
    *out = r;
    return true;
}

int cm_hex_digit(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* ---- arena --------------------------------------------------------------- */

struct cm_arena_chunk {
    cm_arena_chunk *next; /* older chunk */
    size_t cap;           /* payload bytes */
    size_t used;          /* payload bytes handed out */
    _Alignas(16) unsigned char data[];
};

void cm_arena_init(cm_arena *a, size_t chunk_size)
{
    a->head = NULL;
    a->chunk_size = chunk_size < 1024 ? 1024 : chunk_size;
    a->used_bytes = 0;
    a->reserved_bytes = 0;
}

void cm_arena_fini(cm_arena *a)
{
    cm_arena_chunk *c = a->head;
    while (c != NULL) {
        cm_arena_chunk *next = c->next;
        cm_free(c);
        c = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
    a->reserved_bytes = 0;
}

void cm_arena_reset(cm_arena *a)
{
    cm_arena_chunk *head = a->head;
    if (head == NULL) {
        return;
    }
    cm_arena_chunk *c = head->next;
    while (c != NULL) {
        cm_arena_chunk *next = c->next;
        a->reserved_bytes -= sizeof(cm_arena_chunk) + c->cap;
        cm_free(c);
        c = next;
    }
    head->next = NULL;
    head->used = 0;
    a->used_bytes = 0;
}

void *cm_arena_alloc(cm_arena *a, size_t size)
{
    size_t need = (size + 15u) & ~(size_t)15u;
    if (need < size) {
        return NULL;
    }
    cm_arena_chunk *c = a->head;
    if (c == NULL || c->cap - c->used < need) {
        size_t cap = a->chunk_size;
        if (need > cap / 4) {
            cap = need; /* a big block gets its own chunk; keep the current head */
        }
        size_t total;
        if (!cm_add_size(sizeof(cm_arena_chunk), cap, &total)) {
            return NULL;
        }
        cm_arena_chunk *n = cm_alloc(total);
        if (n == NULL) {
            return NULL;
        }
        n->cap = cap;
        n->used = 0;
        a->reserved_bytes += total;
        if (cap == need && c != NULL && c->cap - c->used > 0) {
            /* insert behind the head so the head keeps serving small requests */
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            a->head = n;
        }
        c = n;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->used_bytes += need;
    return p;
}

void *cm_arena_zalloc(cm_arena *a, size_t size)
{
    void *p = cm_arena_alloc(a, size);
    if (p != NULL) {
        memset(p, 0, size);
    }
    return p;
}

char *cm_arena_strndup(cm_arena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX) {
        return NULL;
    }
    char *p = cm_arena_alloc(a, n + 1);
    if (p == NULL) {
        return NULL;
    }
    if (n > 0) {
        memcpy(p, s, n);
    }
    p[n] = '\0';
    return p;
}

char *cm_arena_strdup(cm_arena *a, const char *s)
{
    return cm_arena_strndup(a, s, strlen(s));
}

void *cm_arena_memdup(cm_arena *a, const void *p, size_t n, size_t elem)
{
    size_t bytes;
    if (!cm_mul_size(n, elem, &bytes)) {
        return NULL;
    }
    void *q = cm_arena_alloc(a, bytes);
    if (q != NULL && bytes > 0) {
        memcpy(q, p, bytes);
    }
    return q;
}

/* ---- buffer -------------------------------------------------------------- */

void cm_buf_init(cm_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->oom = false;
    b->sink_failed = false;
    b->sink = NULL;
    b->sink_ctx = NULL;
    b->flushed = 0;
}

void cm_buf_init_sink(cm_buf *b, cm_buf_sink *sink, void *ctx)
{
    cm_buf_init(b);
    b->sink = sink;
    b->sink_ctx = ctx;
}

void cm_buf_fini(cm_buf *b)
{
    cm_free(b->data);
    cm_buf_init(b);
}

bool cm_buf_flush(cm_buf *b)
{
    if (b->oom) {
        return false;
    }
    if (b->sink == NULL || b->len == 0) {
        return true;
    }
    if (!b->sink(b->sink_ctx, b->data, b->len)) {
        b->sink_failed = true;
        b->oom = true;
        return false;
    }
    b->flushed += b->len;
    b->len = 0;
    b->data[0] = '\0';
    return true;
}

size_t cm_buf_total(const cm_buf *b)
{
    return b->flushed + b->len;
}

void cm_buf_reset(cm_buf *b)
{
    b->len = 0;
    b->oom = false;
    b->sink_failed = false;
    if (b->data != NULL) {
        b->data[0] = '\0';
    }
}

bool cm_buf_reserve(cm_buf *b, size_t extra)
{
    if (b->oom) {
        return false;
    }
    size_t need;
    if (!cm_add_size(b->len, extra, &need) || !cm_add_size(need, 1, &need)) {
        b->oom = true;
        return false;
    }
    if (need <= b->cap) {
        return true;
    }
    if (b->sink != NULL && b->len > 0 && b->cap >= CM_BUF_SINK_CHUNK) {
        /* a streaming buffer at its size: hand what it holds on, then see
         * whether the append fits */
        if (!cm_buf_flush(b)) {
            return false;
        }
        if (extra < b->cap) {
            return true;
        }
        need = extra + 1;
    }
    size_t cap = b->cap < 256 ? 256 : b->cap;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = cm_realloc(b->data, cap);
    if (p == NULL) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

/* The external definitions of the inline appends (cm.h). */
extern inline void cm_buf_append(cm_buf *b, const char *s, size_t n);
extern inline void cm_buf_puts(cm_buf *b, const char *s);
extern inline void cm_buf_putc(cm_buf *b, char c);

void cm_buf_append_grow(cm_buf *b, const char *s, size_t n)
{
    if (b->sink != NULL && n >= CM_BUF_SINK_CHUNK) {
        /* a run as large as the chunk goes straight on, uncopied */
        if (cm_buf_flush(b)) {
            if (b->sink(b->sink_ctx, s, n)) {
                b->flushed += n;
            } else {
                b->sink_failed = true;
                b->oom = true;
            }
        }
        return;
    }
    if (!cm_buf_reserve(b, n)) {
        return;
    }
    if (n > 0) {
        memcpy(b->data + b->len, s, n);
    }
    b->len += n;
    b->data[b->len] = '\0';
}

void cm_buf_printf(cm_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if ((size_t)n < sizeof tmp) {
        cm_buf_append(b, tmp, (size_t)n);
        return;
    }
    if (!cm_buf_reserve(b, (size_t)n)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* The one escaper's spelling for the callers that still use this name. */
void cm_buf_json_string(cm_buf *b, const char *s, size_t n)
{
    cm_json_put_str(b, s, n);
}

void cm_buf_put_i64(cm_buf *b, int64_t v)
{
    /* two digits per division: writers put an integer per shape dim,
     * index and byte count */
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    char tmp[24];
    char *e = tmp + sizeof tmp;
    char *p = e;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100u) {
        unsigned r = (unsigned)(u % 100u);
        u /= 100u;
        *--p = pairs[2 * r + 1];
        *--p = pairs[2 * r];
    }
    if (u >= 10u) {
        *--p = pairs[2 * u + 1];
        *--p = pairs[2 * u];
    } else {
        *--p = (char)('0' + u);
    }
    if (v < 0) {
        *--p = '-';
    }
    cm_buf_append(b, p, (size_t)(e - p));
}

char *cm_buf_take(cm_buf *b)
{
    char *p = b->data;
    if (p == NULL) {
        p = cm_alloc(1);
        if (p != NULL) {
            p[0] = '\0';
        }
    }
    cm_buf_init(b);
    return p;
}

/* ---- files and clocks ---------------------------------------------------- */

cm_status cm_file_read(const char *path, char **data_out, size_t *len_out, cm_error *err)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        return cm_error_set(err, errno == ENOENT ? CM_ENOTFOUND : CM_EIO, NULL,
                            "cannot open %s: %s", path, strerror(errno));
    }
    cm_buf b;
    cm_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        cm_buf_append(&b, chunk, n);
    }
    bool failed = ferror(f) != 0;
    if (f != stdin) {
        fclose(f);
    }
    if (failed) {
        cm_buf_fini(&b);
        return cm_error_set(err, CM_EIO, NULL, "cannot read %s", path);
    }
    if (b.oom) {
        cm_buf_fini(&b);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory reading %s", path);
    }
    *len_out = b.len;
    *data_out = cm_buf_take(&b);
    if (*data_out == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory reading %s", path);
    }
    return CM_OK;
}

double cm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t cm_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return 0;
    }
    return (size_t)ru.ru_maxrss * 1024u;
}
