/* SPDX-License-Identifier: Apache-2.0
 * common: status codes, the fixed-size error record, the allocator with its
 * test hook, array growth, arenas and a growable byte buffer. Everything above common/ uses
 * these; nothing here allocates to report an error.
 * Thread contract: cm_error, cm_arena and cm_buf are single-owner; the
 * allocation hook is process-wide and meant for tests only. */
#ifndef CM_H
#define CM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum cm_status {
    CM_OK = 0,
    CM_EINVAL,    /* bad input: the error carries a path or line:col */
    CM_ENOTFOUND, /* a named thing does not exist */
    CM_ECONFLICT, /* the request contradicts existing state */
    CM_ENOMEM,    /* allocation failed */
    CM_EIO,       /* an I/O call failed */
    CM_EINTERNAL  /* a bug or an unexpected state of our own data */
} cm_status;

#define CM_ERROR_PATH_LEN 256
#define CM_ERROR_MSG_LEN  256

/* The first error wins: once code != CM_OK further reports are ignored. */
typedef struct cm_error {
    cm_status code;                /* CM_OK when no error was reported */
    char path[CM_ERROR_PATH_LEN];  /* JSON Pointer or "line:col"; may be empty */
    char msg[CM_ERROR_MSG_LEN];    /* human-readable, no trailing newline */
} cm_error;

/* Resets err to "no error". err may be NULL. */
void cm_error_clear(cm_error *err);

/* Records an error unless one is already recorded; returns code so callers
 * can write `return cm_error_set(err, CM_EINVAL, path, "...")`. err may be
 * NULL; path may be NULL. */
cm_status cm_error_set(cm_error *err, cm_status code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
cm_status cm_error_setv(cm_error *err, cm_status code, const char *path, const char *fmt,
                        va_list ap);

/* Records CM_ENOMEM with the message "out of memory" and no path (unless an
 * error is already recorded) and returns CM_ENOMEM, so an allocation failure
 * reads `return cm_error_oom(err);`. err may be NULL. This is the one place
 * the out-of-memory message is spelled. */
cm_status cm_error_oom(cm_error *err);

/* Reports the error inner describes as seen from a caller: err gets inner's
 * code and path, and the message fmt expands to, then ": ", then inner's
 * message (only the prefix when inner's message is empty; truncated to
 * CM_ERROR_MSG_LEN). As with cm_error_set the first error wins: nothing
 * changes when err already holds one (so wrapping err into itself is a
 * no-op). An inner that is NULL or holds no error is a bug of the caller (its
 * callee failed without saying why): err then gets CM_EINTERNAL, an empty
 * path and the prefix followed by ": unreported error". Returns the code
 * recorded, or the one err would have got. err may be NULL. */
cm_status cm_error_wrap(cm_error *err, const cm_error *inner, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Short lower-case name of a status ("invalid", "not found", ...). */
const char *cm_status_name(cm_status code);

/* ---- cancellation ------------------------------------------------------ */

/* A caller's stop hook for long computations: they call fn(ctx) now and then
 * (each says how often) and, once it returns true, stop with CM_EIO and a
 * message saying so. fn must be cheap and thread-safe with respect to its
 * caller's other threads; it is called on the computing thread. */
typedef struct cm_cancel {
    bool (*fn)(void *ctx); /* true: stop */
    void *ctx;             /* passed to fn */
} cm_cancel;

/* Whether c (may be NULL, or have a NULL fn: never) says stop. */
static inline bool cm_cancelled(const cm_cancel *c)
{
    return c != NULL && c->fn != NULL && c->fn(c->ctx);
}

/* ---- allocation ---------------------------------------------------------- */

/* malloc/realloc/free wrappers; they return NULL on failure and never abort.
 * cm_alloc_fail_after(n) makes the (n+1)th following allocation fail (n = 0:
 * the next one); a negative n disables the hook. Tests use it for OOM loops.
 * The countdown is atomic, so allocations on other threads may take the
 * failure (exactly one allocation fails per arming) without a data race. */
void *cm_alloc(size_t size);
void *cm_calloc(size_t n, size_t size);
void *cm_realloc(void *p, size_t size);
void cm_free(void *p);
void cm_alloc_fail_after(long n);

/* Grows the heap array *items (elem bytes per element, allocated with
 * cm_alloc/cm_realloc or NULL) so that it holds at least need elements:
 * nothing happens when need <= *cap; otherwise the capacity doubles from 16
 * until it reaches need, *items is reallocated and *cap updated. Elements
 * beyond the old capacity are uninitialised; the old ones are kept. On
 * failure (need * elem overflows size_t, or the allocation fails) *items and
 * *cap are unchanged, err gets cm_error_oom and CM_ENOMEM is returned.
 * items points at the caller's typed pointer (pass it as (void **)&arr, or
 * use CM_GROW, which also does the cheap need <= cap test inline). */
cm_status cm_grow(void **items, size_t *cap, size_t need, size_t elem, cm_error *err);

/* cm_grow for uint32_t counts, as the IR tables keep them: the same growth,
 * with the capacity held below UINT32_MAX so that UINT32_MAX stays free as a
 * "no index" marker; need == UINT32_MAX fails with CM_ENOMEM. */
cm_status cm_grow_u32(void **items, uint32_t *cap, uint32_t need, size_t elem, cm_error *err);

/* Typed fronts: CM_GROW(arr, cap, need, err) for a `T *arr` with a size_t
 * cap, CM_GROW_U32 for a uint32_t cap; elem is sizeof *arr. They evaluate
 * need and cap twice (pass plain expressions such as n + 1) and call the
 * function only when the array must grow. */
#define CM_GROW(items, cap, need, err)                                                             \
    ((need) <= (cap) ? (cm_status)CM_OK                                                            \
                     : cm_grow((void **)&(items), &(cap), (need), sizeof *(items), (err)))
#define CM_GROW_U32(items, cap, need, err)                                                         \
    ((need) <= (cap) ? (cm_status)CM_OK                                                            \
                     : cm_grow_u32((void **)&(items), &(cap), (need), sizeof *(items), (err)))

/* Process-wide malloc settings for programs that run the planner's passes
 * (call once at the start of main): freed memory up to 256 MiB stays in the
 * process and blocks up to 32 MiB come from the heap, so each pass reuses
 * pages the one before freed instead of faulting in fresh ones (1M-op
 * propagation pipeline ~15-25% faster, peak RSS +54 MiB). Returns false if
 * the C library refused a setting (harmless: the defaults stay). */
bool cm_tune_malloc(void);

/* Checked arithmetic: false on overflow, *out untouched then. */
bool cm_mul_size(size_t a, size_t b, size_t *out);
bool cm_add_size(size_t a, size_t b, size_t *out);
bool cm_mul_i64(int64_t a, int64_t b, int64_t *out);

/* The value of the hex digit c (0-9, a-f, A-F), or -1 for any other byte. */
int cm_hex_digit(int c);

/* ---- arena --------------------------------------------------------------- */

/* A bump allocator: many small allocations, one free. Memory is 16-byte
 * aligned and is not zeroed unless cm_arena_zalloc is used. */
typedef struct cm_arena_chunk cm_arena_chunk;
typedef struct cm_arena {
    cm_arena_chunk *head; /* newest chunk */
    size_t chunk_size;    /* default chunk payload, bytes */
    size_t used_bytes;    /* total payload handed out, bytes */
    size_t reserved_bytes;/* total chunk memory held, bytes */
} cm_arena;

void cm_arena_init(cm_arena *a, size_t chunk_size);
void cm_arena_fini(cm_arena *a);
/* Forgets every allocation but keeps the newest chunk for reuse. */
void cm_arena_reset(cm_arena *a);
void *cm_arena_alloc(cm_arena *a, size_t size);
void *cm_arena_zalloc(cm_arena *a, size_t size);
/* Copies n bytes and appends a NUL; returns NULL on OOM. */
char *cm_arena_strndup(cm_arena *a, const char *s, size_t n);
char *cm_arena_strdup(cm_arena *a, const char *s);
/* Copies n elements of elem bytes (checked multiplication). */
void *cm_arena_memdup(cm_arena *a, const void *p, size_t n, size_t elem);

/* ---- growable buffer ----------------------------------------------------- */

/* Where a streaming buffer's bytes go: called with each flushed run of len
 * bytes; returns false when it cannot take them (a write error). */
typedef bool cm_buf_sink(void *ctx, const char *data, size_t len);

/* A byte buffer that stays NUL-terminated. After the first failed growth the
 * buffer is marked failed (oom = true) and ignores further appends, so a
 * printer can append freely and check once at the end.
 * A streaming buffer (cm_buf_init_sink) holds at most about CM_BUF_SINK_CHUNK
 * bytes: whenever an append would grow it past that, what it holds goes to
 * its sink first. Only code that appends and never reads back or truncates
 * what it wrote may be given one (the plan writer is such code; the MLIR
 * printer, which rewinds a refused custom form, is not). */
typedef struct cm_buf {
    char *data;          /* NUL-terminated when cap > 0 */
    size_t len;          /* bytes, excluding the NUL */
    size_t cap;          /* bytes allocated */
    bool oom;            /* a growth failed, or the sink refused bytes */
    bool sink_failed;    /* the sink refused bytes (then oom is set too) */
    cm_buf_sink *sink;   /* NULL: an ordinary buffer */
    void *sink_ctx;
    size_t flushed;      /* bytes already given to the sink */
} cm_buf;

#define CM_BUF_SINK_CHUNK ((size_t)1 << 16)

void cm_buf_init(cm_buf *b);
/* A streaming buffer whose bytes go to sink(ctx, …) as it fills; the caller
 * calls cm_buf_flush once done, then cm_buf_fini. */
void cm_buf_init_sink(cm_buf *b, cm_buf_sink *sink, void *ctx);
/* Gives a streaming buffer's held bytes to its sink (nothing for an ordinary
 * buffer). Returns false when the buffer failed (oom) or the sink refused. */
bool cm_buf_flush(cm_buf *b);
/* Bytes appended in all: flushed plus held. */
size_t cm_buf_total(const cm_buf *b);
void cm_buf_fini(cm_buf *b);
void cm_buf_reset(cm_buf *b);
bool cm_buf_reserve(cm_buf *b, size_t extra);
/* The appends below are inline when the bytes fit an ordinary buffer that
 * has not failed (writers call them per byte and per token; a constant
 * string's length folds away), and call cm_buf_append_grow otherwise. */
void cm_buf_append_grow(cm_buf *b, const char *s, size_t n);
inline void cm_buf_append(cm_buf *b, const char *s, size_t n)
{
    if (b->sink == NULL && !b->oom && n < b->cap - b->len) {
        if (n > 0) {
            memcpy(b->data + b->len, s, n);
        }
        b->len += n;
        b->data[b->len] = '\0';
        return;
    }
    cm_buf_append_grow(b, s, n);
}
inline void cm_buf_puts(cm_buf *b, const char *s)
{
    cm_buf_append(b, s, strlen(s));
}
inline void cm_buf_putc(cm_buf *b, char c)
{
    if (b->len + 1 < b->cap && !b->oom) {
        b->data[b->len++] = c;
        b->data[b->len] = '\0';
        return;
    }
    cm_buf_append_grow(b, &c, 1);
}
void cm_buf_printf(cm_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cm_buf_put_i64(cm_buf *b, int64_t v);
/* The n bytes at s as a JSON string literal: exactly cm_json_put_str
 * (common/cm_json.h), which defines the escaping for the whole tree. Kept as
 * a name for the callers that have not moved to cm_json.h yet; new code
 * calls cm_json_put_str. */
void cm_buf_json_string(cm_buf *b, const char *s, size_t n);
/* Hands the data to the caller (free with cm_free) and resets b. */
char *cm_buf_take(cm_buf *b);

/* ---- files --------------------------------------------------------------- */

/* Reads a whole file ("-" is stdin) into a NUL-terminated heap buffer that the
 * caller frees with cm_free. */
cm_status cm_file_read(const char *path, char **data_out, size_t *len_out, cm_error *err);

/* Wall-clock seconds from a monotonic clock. */
double cm_now(void);
/* Peak resident set size of this process, bytes (0 if unknown). */
size_t cm_peak_rss(void);

/* ---- SHA-256 (common/cm_sha256.c) ------------------------------------------
 * FIPS 180-4 SHA-256, streaming. Used for content hashes of plan requests.
 * A context is single-owner; nothing allocates. */
typedef struct cm_sha256 {
    uint32_t h[8];     /* chaining state */
    uint64_t n_bytes;  /* bytes hashed so far */
    uint8_t block[64]; /* pending partial block */
    size_t n_block;    /* bytes in block */
} cm_sha256;

#define CM_SHA256_LEN 32 /* digest bytes; hex text is 64 chars + NUL */

void cm_sha256_init(cm_sha256 *c);
void cm_sha256_update(cm_sha256 *c, const void *data, size_t len);
void cm_sha256_final(cm_sha256 *c, uint8_t out[CM_SHA256_LEN]);
/* One-shot digest of data as 64 lower-case hex digits plus a NUL in hex. */
void cm_sha256_hex(const void *data, size_t len, char hex[2 * CM_SHA256_LEN + 1]);
/* Whether hashing uses the processor's SHA extensions (x86-64 SHA-NI);
 * with portable_only, from now on it does not (tests and benchmarks
 * compare the two; call before any thread hashes). */
bool cm_sha256_accelerated(void);
void cm_sha256_set_portable_only(bool portable_only);
/* Hex of a digest (65 bytes with the NUL). */
void cm_sha256_to_hex(const uint8_t digest[CM_SHA256_LEN], char hex[2 * CM_SHA256_LEN + 1]);

#endif /* CM_H */
