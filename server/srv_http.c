/* SPDX-License-Identifier: Apache-2.0
 * server: libmicrohttpd wrapper (srv_http.h). An srv_req is allocated on the
 * first access-handler call and kept in MHD's per-request pointer; the body
 * accumulates into a cm_buf; the handler runs on the final call, so the
 * response is always queued on a later call than the first (MHD 0.9.75 keeps
 * the connection alive then). The request-completed callback logs, reports to
 * the done hook and frees the request with its arena. */
#include "srv_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

struct srv_http {
    struct MHD_Daemon *d;
    srv_http_opts o;
    uint16_t port;
    atomic_uint in_flight; /* requests between first call and completion */
};

typedef struct hdr {
    const char *name, *value; /* arena copies */
    struct hdr *next;
} hdr;

struct srv_req {
    srv_http *h;
    struct MHD_Connection *conn;
    cm_arena arena;
    cm_buf body;
    const char *method, *path; /* borrowed from MHD, valid for the request */
    double t0;                 /* cm_now() at arrival */
    bool too_large;            /* body over the limit: the handler answers 413 */
    bool oom;                  /* body growth failed: the handler answers 503 */
    bool handled;              /* the handler ran */
    bool queued;               /* a response was queued */
    const char *route;
    int route_index;
    const char *error_code;
    const char *principal;
    void *user;
    hdr *hdrs;
    struct MHD_Response *resp;
    unsigned status;
    size_t resp_len;
};

/* ---- logging ------------------------------------------------------------------ */

static size_t put_json_str(char *buf, size_t cap, size_t at, const char *s)
{
    static const char hexd[] = "0123456789abcdef";
    if (at < cap) {
        buf[at] = '"';
    }
    at++;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0' && at + 8 < cap; p++) {
        unsigned char ch = *p;
        if (ch == '"' || ch == '\\') {
            buf[at++] = '\\';
            buf[at++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            buf[at++] = '\\';
            buf[at++] = 'u';
            buf[at++] = '0';
            buf[at++] = '0';
            buf[at++] = hexd[ch >> 4];
            buf[at++] = hexd[ch & 15];
        } else {
            buf[at++] = (char)ch;
        }
    }
    if (at < cap) {
        buf[at] = '"';
    }
    return at + 1;
}

static void remote_text(struct MHD_Connection *c, char *out, size_t cap)
{
    snprintf(out, cap, "-");
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci == NULL || ci->client_addr == NULL) {
        return;
    }
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in4->sin_addr, out, (socklen_t)cap);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, out, (socklen_t)cap);
    }
}

/* One line: {"ts":..,"remote":..,"method":..,"path":..,"route":..,"status":..,
 * "bytes_in":..,"bytes_out":..,"ms":..,"error":..,"principal":..}. One write(2)
 * so lines from different threads do not interleave. */
static void log_line(const srv_req *r, unsigned status, double dur_s, bool aborted)
{
    int fd = r->h->o.log_fd;
    if (fd < 0) {
        return;
    }
    char buf[2048], ts[40], remote[64];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03ldZ", now.tv_nsec / 1000000);
    remote_text(r->conn, remote, sizeof remote);
    size_t at = (size_t)snprintf(buf, sizeof buf, "{\"ts\":\"%s\",\"remote\":\"%s\",\"method\":",
                                 ts, remote);
    at = put_json_str(buf, sizeof buf - 400, at, r->method != NULL ? r->method : "");
    at += (size_t)snprintf(buf + at, sizeof buf - at, ",\"path\":");
    at = put_json_str(buf, sizeof buf - 300, at, r->path != NULL ? r->path : "");
    at += (size_t)snprintf(buf + at, sizeof buf - at,
                           ",\"route\":\"%s\",\"status\":%u,\"bytes_in\":%zu,\"bytes_out\":%zu,"
                           "\"ms\":%.3f",
                           r->route != NULL ? r->route : "-", status, r->body.len, r->resp_len,
                           dur_s * 1e3);
    if (r->error_code != NULL) {
        at += (size_t)snprintf(buf + at, sizeof buf - at, ",\"error\":\"%s\"", r->error_code);
    }
    if (r->principal != NULL) {
        at += (size_t)snprintf(buf + at, sizeof buf - at, ",\"principal\":\"%s\"", r->principal);
    }
    if (aborted) {
        at += (size_t)snprintf(buf + at, sizeof buf - at, ",\"aborted\":true");
    }
    if (at > sizeof buf - 3) {
        at = sizeof buf - 3;
    }
    buf[at++] = '}';
    buf[at++] = '\n';
    ssize_t w = write(fd, buf, at);
    (void)w; /* a log that cannot be written must not fail the request */
}

/* ---- MHD callbacks --------------------------------------------------------------- */

static void req_free(srv_req *r)
{
    if (r->resp != NULL) {
        MHD_destroy_response(r->resp);
    }
    cm_buf_fini(&r->body);
    cm_arena_fini(&r->arena);
    cm_free(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    srv_http *h = cls;
    srv_req *r = *con_cls;
    if (r == NULL) {
        return;
    }
    *con_cls = NULL;
    double dur = cm_now() - r->t0;
    unsigned status = r->queued ? r->status : 0;
    if (h->o.done != NULL) {
        h->o.done(h->o.cls, r, status, dur);
    }
    log_line(r, status, dur, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
    req_free(r);
    atomic_fetch_sub(&h->in_flight, 1);
}

static enum MHD_Result queue(srv_req *r)
{
    if (r->resp == NULL) {
        /* the handler did not reply, or building the reply failed */
        static const char body[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"no response\",\"path\":\"\"}}";
        r->resp = MHD_create_response_from_buffer(sizeof body - 1, (void *)(uintptr_t)body,
                                                  MHD_RESPMEM_PERSISTENT);
        if (r->resp == NULL) {
            return MHD_NO;
        }
        MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        r->status = 500;
        r->resp_len = sizeof body - 1;
    }
    r->queued = true;
    return MHD_queue_response(r->conn, r->status, r->resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    srv_http *h = cls;
    srv_req *r = *con_cls;
    if (r == NULL) {
        r = cm_calloc(1, sizeof *r);
        if (r == NULL) {
            return MHD_NO; /* MHD closes the connection */
        }
        r->h = h;
        r->conn = c;
        r->method = method;
        r->path = url;
        r->t0 = cm_now();
        r->route_index = -1;
        cm_arena_init(&r->arena, 4096);
        cm_buf_init(&r->body);
        *con_cls = r;
        atomic_fetch_add(&h->in_flight, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl != NULL) {
            unsigned long long n = strtoull(cl, NULL, 10);
            if (n > h->o.max_body_bytes) {
                /* answer now: MHD closes the connection after this reply */
                r->too_large = true;
                r->handled = true;
                h->o.handler(h->o.cls, r);
                return queue(r);
            }
            if (n > 0 && !cm_buf_reserve(&r->body, (size_t)n)) {
                r->oom = true;
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->handled) {
            return MHD_YES; /* already answered; discard */
        }
        if (r->body.len + n > h->o.max_body_bytes) {
            r->too_large = true;
            r->handled = true;
            h->o.handler(h->o.cls, r);
            return queue(r);
        }
        if (!r->oom) {
            cm_buf_append(&r->body, upload_data, n);
            r->oom = r->body.oom;
        }
        return MHD_YES;
    }
    if (r->handled) {
        return r->queued ? MHD_YES : queue(r);
    }
    r->handled = true;
    h->o.handler(h->o.cls, r);
    return queue(r);
}

/* ---- start / stop ------------------------------------------------------------------ */

cm_status srv_http_start(const srv_http_opts *o, srv_http **out, cm_error *err)
{
    *out = NULL;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, o->host, &a4) == 1) {
        struct sockaddr_in *sin = (struct sockaddr_in *)(void *)&ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(o->port);
        sin->sin_addr = a4;
    } else if (inet_pton(AF_INET6, o->host, &a6) == 1) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)(void *)&ss;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(o->port);
        sin6->sin6_addr = a6;
        flags |= MHD_USE_IPv6;
    } else {
        return cm_error_set(err, CM_EINVAL, NULL, "listen address '%s' is not a numeric IP",
                            o->host);
    }
    srv_http *h = cm_calloc(1, sizeof *h);
    if (h == NULL) {
        return cm_error_oom(err);
    }
    h->o = *o;
    atomic_init(&h->in_flight, 0);
    unsigned threads = o->threads > 0 ? o->threads : 1;
    h->d = MHD_start_daemon(
        flags, o->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR,
        (const struct sockaddr *)(const void *)&ss, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_TIMEOUT,
        o->idle_timeout_s, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_END);
    if (h->d == NULL) {
        int e = errno;
        cm_free(h);
        return cm_error_set(err, CM_EIO, NULL, "cannot listen on %s:%u: %s", o->host,
                            (unsigned)o->port, e != 0 ? strerror(e) : "libmicrohttpd failed");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di != NULL ? di->port : o->port;
    *out = h;
    return CM_OK;
}

uint16_t srv_http_port(const srv_http *h)
{
    return h->port;
}

unsigned srv_http_in_flight(const srv_http *h)
{
    return atomic_load(&((srv_http *)(uintptr_t)h)->in_flight);
}

void srv_http_stop(srv_http *h, double drain_s)
{
    if (h == NULL) {
        return;
    }
    /* The listen socket is closed only after MHD_stop_daemon: quiesce asks
     * each pool thread to drop it from its epoll set, and closing it before
     * they have done so makes libmicrohttpd abort ("Failed to remove listen
     * FD from epoll set"). Until then new connections wait in the backlog
     * and are reset by the close. */
    MHD_socket ls = MHD_quiesce_daemon(h->d);
    double until = cm_now() + drain_s;
    while (atomic_load(&h->in_flight) > 0 && cm_now() < until) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(h->d);
    if (ls != MHD_INVALID_SOCKET) {
        close(ls);
    }
    cm_free(h);
}

/* ---- request accessors ----------------------------------------------------------------- */

const char *srv_req_method(const srv_req *r)
{
    return r->method;
}

const char *srv_req_path(const srv_req *r)
{
    return r->path;
}

const char *srv_req_query(const srv_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *srv_req_header(const srv_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *srv_req_body(const srv_req *r, size_t *len_out)
{
    *len_out = r->body.len;
    return r->body.data != NULL ? r->body.data : "";
}

bool srv_req_body_too_large(const srv_req *r)
{
    return r->too_large;
}

bool srv_req_body_oom(const srv_req *r)
{
    return r->oom;
}

size_t srv_req_max_body(const srv_req *r)
{
    return r->h->o.max_body_bytes;
}

cm_arena *srv_req_arena(srv_req *r)
{
    return &r->arena;
}

const char *srv_req_remote(const srv_req *r)
{
    char buf[64];
    remote_text(r->conn, buf, sizeof buf);
    char *s = cm_arena_strdup(&((srv_req *)(uintptr_t)r)->arena, buf);
    return s != NULL ? s : "-";
}

double srv_req_elapsed(const srv_req *r)
{
    return cm_now() - r->t0;
}

void srv_req_set_route(srv_req *r, const char *route, int route_index)
{
    r->route = route;
    r->route_index = route_index;
}

const char *srv_req_route(const srv_req *r)
{
    return r->route;
}

int srv_req_route_index(const srv_req *r)
{
    return r->route_index;
}

void srv_req_set_error_code(srv_req *r, const char *code)
{
    r->error_code = code;
}

const char *srv_req_error_code(const srv_req *r)
{
    return r->error_code;
}

void srv_req_set_principal(srv_req *r, const char *who)
{
    r->principal = who;
}

void srv_req_set_user(srv_req *r, void *p)
{
    r->user = p;
}

void *srv_req_user(const srv_req *r)
{
    return r->user;
}

void srv_req_add_header(srv_req *r, const char *name, const char *value)
{
    hdr *x = cm_arena_alloc(&r->arena, sizeof *x);
    if (x == NULL) {
        return;
    }
    x->name = cm_arena_strdup(&r->arena, name);
    x->value = cm_arena_strdup(&r->arena, value);
    if (x->name == NULL || x->value == NULL) {
        return;
    }
    x->next = r->hdrs;
    r->hdrs = x;
}

static void finish(srv_req *r, struct MHD_Response *resp, unsigned status, const char *ctype,
                   size_t len)
{
    if (resp == NULL) {
        return; /* queue() answers 500 */
    }
    if (r->resp != NULL) {
        MHD_destroy_response(r->resp);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    for (const hdr *x = r->hdrs; x != NULL; x = x->next) {
        MHD_add_response_header(resp, x->name, x->value);
    }
    r->resp = resp;
    r->status = status;
    r->resp_len = len;
}

void srv_req_reply(srv_req *r, unsigned status, const char *content_type, const char *body,
                   size_t len)
{
    finish(r,
           MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_PERSISTENT),
           status, content_type, len);
}

void srv_req_reply_take(srv_req *r, unsigned status, const char *content_type, char *body,
                        size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, body,
                                                                                   cm_free);
    if (resp == NULL) {
        cm_free(body);
    }
    finish(r, resp, status, content_type, len);
}

void srv_req_reply_shared(srv_req *r, unsigned status, const char *content_type,
                          const char *body, size_t len, void (*release)(void *), void *ctx)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback_cls(
        len, (void *)(uintptr_t)body, release, ctx);
    if (resp == NULL) {
        release(ctx);
    }
    finish(r, resp, status, content_type, len);
}

bool srv_req_has_reply(const srv_req *r)
{
    return r->resp != NULL;
}
