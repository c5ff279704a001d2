/* SPDX-License-Identifier: Apache-2.0
 * store: body coding (st_int.h, "Body coding"). Graph and plan bodies of
 * ST_PACK_MIN bytes or more are kept zstd-compressed (level 1) when that
 * saves at least an eighth; a column body_coding says which (0 as given, 1
 * zstd). Compression runs before the handle's mutex is taken, on a context
 * from a small pool; decompression runs inside SQL (st_body), under the
 * mutex, on the handle's one context, so every row reader sees the bytes as
 * they were put. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <zstd.h>

#include <sqlite3.h>

#include "st_int.h"

#define ST_PACK_MIN   512 /* bytes: below it the saving is a fraction of one page */
#define ST_PACK_LEVEL 1   /* ~10x on plan documents at several hundred MB/s */

struct st_pack {
    pthread_mutex_t mu; /* guards cctx/n_cctx */
    ZSTD_CCtx *cctx[ST_PACK_POOL];
    int n_cctx;
    ZSTD_DCtx *dctx; /* used by st_body, under the handle's mutex */
};

st_pack *st_pack_create(void)
{
    st_pack *p = st_alloc(sizeof *p);
    if (p == NULL) {
        return NULL;
    }
    memset(p, 0, sizeof *p);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        cm_free(p);
        return NULL;
    }
    return p;
}

void st_pack_destroy(st_pack *p)
{
    if (p == NULL) {
        return;
    }
    for (int i = 0; i < p->n_cctx; i++) {
        ZSTD_freeCCtx(p->cctx[i]);
    }
    ZSTD_freeDCtx(p->dctx);
    pthread_mutex_destroy(&p->mu);
    cm_free(p);
}

static ZSTD_CCtx *cctx_take(st_pack *p)
{
    ZSTD_CCtx *c = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n_cctx > 0) {
        c = p->cctx[--p->n_cctx];
    }
    pthread_mutex_unlock(&p->mu);
    return c != NULL ? c : ZSTD_createCCtx();
}

static void cctx_give(st_pack *p, ZSTD_CCtx *c)
{
    pthread_mutex_lock(&p->mu);
    if (p->n_cctx < ST_PACK_POOL) {
        p->cctx[p->n_cctx++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    ZSTD_freeCCtx(c);
}

void st_pack_body(st_pack *p, const char *body, size_t len, st_packed *out)
{
    out->data = body;
    out->len = len;
    out->coding = ST_CODING_RAW;
    out->heap = NULL;
    if (p == NULL || body == NULL || len < ST_PACK_MIN) {
        return;
    }
    size_t cap = ZSTD_compressBound(len);
    char *buf = ZSTD_isError(cap) ? NULL : st_alloc(cap);
    ZSTD_CCtx *c = buf != NULL ? cctx_take(p) : NULL;
    if (c == NULL) {
        cm_free(buf); /* benign: the body goes in as given */
        return;
    }
    size_t n = ZSTD_compressCCtx(c, buf, cap, body, len, ST_PACK_LEVEL);
    cctx_give(p, c);
    if (ZSTD_isError(n) || n > len - len / 8) {
        cm_free(buf);
        return;
    }
    out->data = buf;
    out->len = n;
    out->coding = ST_CODING_ZSTD;
    out->heap = buf;
}

void st_packed_fini(st_packed *pk)
{
    cm_free(pk->heap);
    memset(pk, 0, sizeof *pk);
}

/* The size a zstd-coded value says it decodes to, or -1 when it is not a
 * frame with a known size (a damaged row). */
static int64_t coded_size(const void *v, size_t n)
{
    unsigned long long sz = ZSTD_getFrameContentSize(v, n);
    if (sz == ZSTD_CONTENTSIZE_UNKNOWN || sz == ZSTD_CONTENTSIZE_ERROR || sz > INT64_MAX) {
        return -1;
    }
    return (int64_t)sz;
}

/* SQL st_body(value, coding): the value as put (a blob), decoding coding 1;
 * NULL stays NULL. A damaged frame is an SQL error naming it. */
static void sql_body(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    st_pack *p = sqlite3_user_data(ctx);
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    int coding = sqlite3_value_int(argv[1]);
    const void *v = sqlite3_value_blob(argv[0]);
    size_t n = (size_t)sqlite3_value_bytes(argv[0]);
    if (v == NULL && n > 0) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    if (coding == ST_CODING_RAW) {
        sqlite3_result_value(ctx, argv[0]);
        return;
    }
    int64_t limit = sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1);
    int64_t size = coding == ST_CODING_ZSTD ? coded_size(v, n) : -1;
    if (size < 0 || size > limit) {
        sqlite3_result_error(ctx, "stored body is damaged (not a zstd frame of known size)", -1);
        return;
    }
    if (p->dctx == NULL && (p->dctx = ZSTD_createDCtx()) == NULL) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    char *out = sqlite3_malloc64((sqlite3_uint64)size + 1u);
    if (out == NULL) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    size_t got = ZSTD_decompressDCtx(p->dctx, out, (size_t)size + 1u, v, n);
    if (ZSTD_isError(got) || got != (size_t)size) {
        sqlite3_free(out);
        sqlite3_result_error(ctx, "stored body is damaged (its zstd frame does not decode)", -1);
        return;
    }
    sqlite3_result_blob64(ctx, out, (sqlite3_uint64)size, sqlite3_free);
}

/* SQL st_body_len(value): the decoded length of a zstd-coded value, read
 * from its frame header (the row is not decoded); NULL for NULL, an error
 * for a damaged frame. Raw values take length() instead, which SQLite
 * answers without reading the value. */
static void sql_body_len(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    const void *v = sqlite3_value_blob(argv[0]);
    int64_t size = v != NULL ? coded_size(v, (size_t)sqlite3_value_bytes(argv[0])) : -1;
    if (size < 0) {
        sqlite3_result_error(ctx, "stored body is damaged (not a zstd frame of known size)", -1);
        return;
    }
    sqlite3_result_int64(ctx, size);
}

int st_pack_register(sqlite3 *conn, st_pack *p)
{
    int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY;
    int rc = sqlite3_create_function_v2(conn, "st_body", 2, flags, p, sql_body, NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_create_function_v2(conn, "st_body_len", 1, flags, p, sql_body_len, NULL, NULL,
                                        NULL);
    }
    return rc;
}
