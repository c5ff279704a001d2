/* SPDX-License-Identifier: Apache-2.0
 * server: the one status -> HTTP error table and the reply helpers every
 * handler uses: error documents {"error":{"code","message","path"}} (bad
 * client data gives 4xx with a path, our own data 500 without one), JSON
 * bodies, list replies; query, path-segment and body-kind parsing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cm_json.h"
#include "srv_int.h"
#include "srv_json.h"

/* ---- errors ------------------------------------------------------------------------------ */

/* The one table from error to HTTP status (STYLE.md). */
static const struct {
    const char *code;
    unsigned http;
} err_table[E_COUNT] = {
    [E_INVALID] = {"invalid", 400},
    [E_UNAUTHORIZED] = {"unauthorized", 401},
    [E_FORBIDDEN] = {"forbidden", 403},
    [E_NOT_FOUND] = {"not_found", 404},
    [E_METHOD] = {"method_not_allowed", 405},
    [E_CONFLICT] = {"conflict", 409},
    [E_TOO_LARGE] = {"too_large", 413},
    [E_MEDIA] = {"unsupported_media_type", 415},
    [E_INTERNAL] = {"internal", 500},
    [E_UNAVAILABLE] = {"unavailable", 503},
    [E_TIMEOUT] = {"timeout", 503},
    [E_NOMEM] = {"out_of_memory", 503},
    [E_REQ_TIMEOUT] = {"request_timeout", 408},
    [E_URI_TOO_LONG] = {"uri_too_long", 414},
    [E_HEADERS_LARGE] = {"headers_too_large", 431},
    [E_NOT_IMPL] = {"not_implemented", 501},
    [E_VERSION] = {"http_version_not_supported", 505},
};

_Static_assert(E_COUNT == SRV_METRIC_CODES, "one error counter per code");

/* The first code of an HTTP status in the table (503 is unavailable), else
 * invalid. */
static srv_err err_of_http(unsigned status)
{
    for (size_t i = 0; i < E_COUNT; i++) {
        if (err_table[i].http == status) {
            return (srv_err)i;
        }
    }
    return E_INVALID;
}

void srv_reply_count_refusal(void *cls, unsigned status)
{
    srv_app *app = cls;
    atomic_fetch_add(&app->metrics.errors[err_of_http(status)], 1);
}

size_t srv_reply_refusal(void *cls, unsigned status, const char *message, const char *origin,
                         char *buf, size_t cap, char *hdrs, size_t hcap)
{
    srv_app *app = cls;
    srv_cors_lines(app, origin, hdrs, hcap);
    srv_err e = err_of_http(status);
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "{\"error\":{");
    cm_json_put_kv_str(&b, "code", err_table[e].code);
    cm_json_put_kv_str(&b, "message", message);
    cm_json_put_kv_str(&b, "path", "");
    cm_buf_puts(&b, "}}\n");
    atomic_fetch_add(&app->metrics.errors[e], 1);
    size_t n = 0;
    if (!b.oom && b.len <= cap) {
        memcpy(buf, b.data, b.len);
        n = b.len;
    } else {
        static const char oom[] =
            "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\",\"path\":\"\"}}\n";
        n = sizeof oom - 1 <= cap ? sizeof oom - 1 : 0;
        memcpy(buf, oom, n);
    }
    cm_buf_fini(&b);
    return n;
}

const char *srv_err_code(srv_err e)
{
    return err_table[e].code;
}

srv_err srv_err_of_status(cm_status st)
{
    switch (st) {
    case CM_EINVAL:
        return E_INVALID;
    case CM_ENOTFOUND:
        return E_NOT_FOUND;
    case CM_ECONFLICT:
        return E_CONFLICT;
    case CM_ENOMEM:
        return E_NOMEM;
    case CM_EIO:
        return E_UNAVAILABLE;
    case CM_OK:
    case CM_EINTERNAL:
        break;
    }
    return E_INTERNAL;
}

void srv_reply_err(srv_app *app, srv_req *r, srv_err e, const char *path, const char *fmt, ...)
{
    char msg[CM_ERROR_MSG_LEN + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "{\"error\":{");
    cm_json_put_kv_str(&b, "code", err_table[e].code);
    cm_json_put_kv_str(&b, "message", msg);
    cm_json_put_kv_str(&b, "path", e == E_INTERNAL || path == NULL ? "" : path);
    cm_buf_puts(&b, "}}\n");
    srv_req_set_error_code(r, err_table[e].code);
    atomic_fetch_add(&app->metrics.errors[e], 1);
    if (e == E_UNAUTHORIZED) {
        srv_req_add_header(r, "WWW-Authenticate", "Bearer realm=\"shardplan\"");
    }
    if (e == E_UNAVAILABLE || e == E_TIMEOUT || e == E_NOMEM) {
        srv_req_add_header(r, "Retry-After", "1");
    }
    size_t len = b.len;
    char *data = cm_buf_take(&b);
    if (data == NULL) {
        static const char oom[] =
            "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\",\"path\":\"\"}}\n";
        srv_req_reply(r, 503, "application/json", oom, sizeof oom - 1);
        return;
    }
    srv_req_reply_take(r, err_table[e].http, "application/json", data, len);
}

void srv_reply_cm(srv_app *app, srv_req *r, const cm_error *e)
{
    srv_err x = srv_err_of_status(e->code);
    srv_reply_err(app, r, x, e->path, "%s", e->msg[0] != '\0' ? e->msg : cm_status_name(e->code));
}

void srv_reply_ours(srv_app *app, srv_req *r, const cm_error *e)
{
    srv_reply_err(app, r, e->code == CM_ENOMEM ? E_NOMEM : E_INTERNAL, NULL, "%s", e->msg);
}

/* Replies with buffer b (taken) as JSON. */
void srv_reply_buf(srv_app *app, srv_req *r, unsigned status, cm_buf *b)
{
    if (b->oom) {
        cm_buf_fini(b);
        srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return;
    }
    size_t len = b->len;
    char *data = cm_buf_take(b);
    if (data == NULL) {
        srv_req_reply(r, status, "application/json", "{}\n", 3);
        return;
    }
    srv_req_reply_take(r, status, "application/json", data, len);
}

/* ---- query, path and body parsing ------------------------------------------------------------ */

bool srv_parse_i64(const char *s, int64_t lo, int64_t *out)
{
    if (s == NULL || *s == '\0') {
        return false;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* Optional integer query argument; false after replying 400. */
bool srv_query_i64(srv_app *app, srv_req *r, const char *key, int64_t lo, int64_t *out)
{
    const char *v = srv_req_query(r, key);
    if (v == NULL) {
        return true;
    }
    if (!srv_parse_i64(v, lo, out)) {
        char path[64];
        snprintf(path, sizeof path, "/%s", key);
        srv_reply_err(app, r, E_INVALID, path, "query argument %s: expected an integer >= %lld",
                      key, (long long)lo);
        return false;
    }
    return true;
}

bool srv_query_paging(srv_app *app, srv_req *r, size_t *limit, int64_t *after)
{
    int64_t l = 0, a = 0;
    if (!srv_query_i64(app, r, "limit", 0, &l) || !srv_query_i64(app, r, "after", 0, &a)) {
        return false;
    }
    if (l > ST_LIST_MAX_LIMIT) {
        srv_reply_err(app, r, E_INVALID, "/limit", "limit must be at most %d", ST_LIST_MAX_LIMIT);
        return false;
    }
    *limit = (size_t)l;
    *after = a;
    return true;
}

static bool looks_json(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
            return s[i] == '{' || s[i] == '[' || s[i] == '"';
        }
    }
    return false;
}

static bool ctype_is(const char *ct, const char *what)
{
    size_t n = strlen(what);
    return strncasecmp(ct, what, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* Classifies the body by Content-Type (sniffed when absent or curl's
 * default form type). allow_mlir: MLIR text is acceptable. False after
 * replying 415. */
bool srv_body_kind_of(srv_app *app, srv_req *r, bool allow_mlir, body_kind *out)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    const char *ct = srv_req_header(r, "Content-Type");
    if (ct == NULL || ctype_is(ct, "application/x-www-form-urlencoded") ||
        ctype_is(ct, "application/octet-stream")) {
        *out = allow_mlir && !looks_json(body, len) ? BODY_MLIR : BODY_JSON;
        return true;
    }
    if (ctype_is(ct, "application/json") || strstr(ct, "+json") != NULL) {
        *out = BODY_JSON;
        return true;
    }
    if (allow_mlir && (ctype_is(ct, "text/plain") || ctype_is(ct, "application/mlir") ||
                       ctype_is(ct, "text/x-mlir"))) {
        *out = BODY_MLIR;
        return true;
    }
    srv_reply_err(app, r, E_MEDIA, NULL, "unsupported Content-Type '%s': send application/json%s",
                  ct, allow_mlir ? " or text/plain (MLIR)" : "");
    return false;
}

const char *srv_body_json(srv_app *app, srv_req *r, size_t *len)
{
    body_kind k;
    if (!srv_body_kind_of(app, r, false, &k)) {
        return NULL;
    }
    return srv_req_body(r, len);
}

void srv_set_location(srv_req *r, const char *collection, int64_t id)
{
    char loc[96];
    snprintf(loc, sizeof loc, "/v1/%s/%lld", collection, (long long)id);
    srv_req_add_header(r, "Location", loc);
}

void srv_reply_empty(srv_app *app, srv_req *r, cm_status st, const cm_error *e)
{
    if (st != CM_OK) {
        srv_reply_cm(app, r, e);
        return;
    }
    srv_req_reply(r, 204, "application/json", "", 0);
}

/* The answer of a list route (srv_int.h). */
void srv_reply_list(srv_app *app, srv_req *r, cm_status st, const cm_error *e, const void *items,
                    size_t n, size_t size, int64_t next_after, srv_item_fn fn, const void *ctx)
{
    if (st != CM_OK) {
        srv_reply_cm(app, r, e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "{\"items\":[");
    for (size_t i = 0; i < n; i++) {
        cm_json_put_sep(&b);
        fn(&b, (const char *)items + i * size, ctx);
    }
    cm_buf_putc(&b, ']');
    cm_json_put_kv_i64(&b, "next_after", next_after);
    cm_buf_puts(&b, "}\n");
    srv_reply_buf(app, r, 200, &b);
}
