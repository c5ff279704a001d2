/* SPDX-License-Identifier: Apache-2.0
 * server: libmicrohttpd wrapper (srv_http.h). An srv_req is allocated on the
 * first access-handler call and kept in MHD's per-request pointer; the body
 * accumulates into a cm_buf; the handler runs on the final call, so the
 * response is always queued on a later call than the first (MHD 0.9.75 keeps
 * the connection alive then). The request-completed callback logs, reports to
 * the done hook and frees the request with its arena.
 * Connections: the gate (srv_gate.c) owns the listen socket, checks each
 * connection's first head and hands good ones over with MHD_add_connection
 * (the daemon runs with MHD_USE_NO_LISTEN_SOCKET); it also keeps the counts
 * in total and per address, which on_connection's close notice decrements.
 * Limits (docs/operations.md): the early hook checks the token once the head
 * is complete, before any body byte is kept; every body reserves its bytes
 * against one server-wide cap (503 past it); connections are bounded in total
 * and per client address (by the gate); a watchdog thread cuts connections whose request
 * head is not complete by its deadline, however slowly bytes keep coming;
 * a head framing its body ambiguously (differing Content-Length headers,
 * or Content-Length with Transfer-Encoding) is refused before its body;
 * memory is given back to the system after a burst of bodies.
 * Compression: a JSON or MLIR reply of GZIP_MIN_BYTES or more goes out
 * gzip-coded (zlib) when the request's Accept-Encoding accepts gzip, with
 * Content-Encoding: gzip, its ETag made weak (RFC 9110 8.8.1: the coded bytes
 * differ) and Vary: Accept-Encoding on every such reply, coded or not. */
#define _GNU_SOURCE /* POLLRDHUP, malloc_trim (Linux, glibc) */
#include "srv_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <microhttpd.h>

#include "srv_gate.h"

/* One open connection, for the head deadline (the watchdog). */
typedef struct conn_track {
    int fd;
    double t0;      /* cm_now() when the connection opened or its last reply completed */
    bool head_done; /* the current request's head is complete */
    bool body_done; /* ... and its body (the handler runs or has run) */
    double t_head;  /* cm_now() when the head completed */
    double t_last;  /* ... or the last body bytes arrived */
    size_t got;     /* body bytes received so far */
    bool line_seen; /* the current request's line has arrived (its head has begun) */
    bool answered;  /* a response to the current request is queued */
    bool cut;       /* the watchdog has answered or shut it down */
    double linger_until; /* answered by the watchdog: shut it down then (0: done) */
    char origin[256];    /* the current request's Origin header, or "" */
    struct sockaddr_storage peer;
    struct conn_track *prev, *next;
} conn_track;

/* A client's deferred requests, waiting or running (handler_per_client). */
typedef struct off_client {
    char key[80]; /* "token:ID"-style principal, else "ip:ADDRESS" */
    unsigned n;
} off_client;

struct srv_http {
    struct MHD_Daemon *d;
    srv_gate *gate; /* accepts and checks first heads (srv_gate.h) */
    int listen_fd;
    srv_http_opts o;
    uint16_t port;
    atomic_uint in_flight; /* requests between first call and completion */
    atomic_size_t body_bytes;  /* bytes reserved by the bodies in flight */
    atomic_size_t freed_bytes; /* body bytes freed since the last malloc_trim */

    pthread_mutex_t conn_mu; /* guards conns and the watchdog's flags */
    pthread_cond_t conn_cv;
    conn_track *conns;
    bool watch_stop;
    bool watch_running;
    pthread_t watch;

    /* handler threads (srv_req_defer): a queue of suspended requests */
    pthread_mutex_t off_mu;
    pthread_cond_t off_cv;
    struct srv_req *off_head, *off_tail;
    unsigned off_queued; /* waiting in the queue */
    off_client *off_clients; /* handler_queue + handler_threads slots; n == 0 is free */
    unsigned n_off_clients;
    bool off_stop;       /* srv_http_stop: run what is queued, then exit */
    pthread_t *off_threads;
    unsigned n_off; /* started */
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
    double t_ready;            /* cm_now() when it was complete and its handler first ran */
    bool too_large;            /* body over the limit: the handler answers 413 */
    bool oom;                  /* body growth failed: the handler answers 503 */
    bool busy;                 /* the in-flight body cap refused it: 503 */
    const char *bad_head;      /* why the head's body framing is ambiguous (400), or NULL */
    bool authorized;           /* the early hook checked the token */
    size_t reserved;           /* bytes counted in h->body_bytes */
    int fd;                    /* the connection's socket */
    bool handled;              /* the handler ran */
    bool queued;               /* a response was queued */
    bool cut;                  /* the watchdog answered 408: discard, then close */
    bool defer;                /* the handler asked to run on a handler thread */
    bool on_handler;           /* ... and runs there now */
    bool overloaded;           /* ... but the handler threads' queue was full */
    bool overloaded_client;    /* ... or its client had handler_per_client there */
    off_client *off_slot;      /* its client's count while deferred, else NULL */
    struct srv_req *off_next;  /* the handler threads' queue */
    const char *route;
    int route_index;
    const char *error_code;
    const char *principal;
    void *user;
    hdr *hdrs;
    struct MHD_Response *resp;
    unsigned status;
    size_t resp_len;
    bool vary_encoding; /* the reply's coding depends on Accept-Encoding */
    bool gzipped;       /* ... and it is gzip */
};

static size_t gate_refuse(void *cls, const srv_gate_refusal *x, char *buf, size_t cap,
                          char *hdrs, size_t hcap);

/* ---- logging ------------------------------------------------------------------ */

/* The length of the well-formed UTF-8 sequence at p (2 to 4 bytes), 0 when
 * the bytes there are not one (Unicode 15, table 3-7). */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) {
            return 0;
        }
    }
    return n;
}

/* s as a JSON string at buf + at (cap bytes in all): controls escaped,
 * bytes that are not well-formed UTF-8 (a percent-decoded path may hold any)
 * written as U+FFFD, so the line is always valid JSON. */
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
        } else if (ch >= 0x80) {
            size_t n = utf8_len(p);
            if (n == 0) {
                memcpy(buf + at, "\\ufffd", 6);
                at += 6;
            } else {
                memcpy(buf + at, p, n);
                at += n;
                p += n - 1;
            }
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

/* Now as the log's "ts": 2026-12-07T23:57:27.206Z (cap >= 32). */
static void log_ts(char *ts, size_t cap)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, cap - n, ".%03ldZ", now.tv_nsec / 1000000);
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
    log_ts(ts, sizeof ts);
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
    if (r->reserved > 0) {
        atomic_fetch_sub(&r->h->body_bytes, r->reserved);
    }
    atomic_fetch_add(&r->h->freed_bytes, r->body.cap);
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
    /* the next request on this connection gets its own head deadline */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci != NULL && ci->socket_context != NULL) {
        conn_track *t = ci->socket_context;
        pthread_mutex_lock(&h->conn_mu);
        t->head_done = false;
        t->body_done = false;
        t->got = 0;
        t->line_seen = false;
        t->answered = false;
        t->origin[0] = '\0';
        t->t0 = cm_now();
        pthread_mutex_unlock(&h->conn_mu);
    }
    /* After a burst, give the freed body memory back: glibc keeps freed
     * large chunks of the heap mapped otherwise. */
    if (atomic_fetch_sub(&h->in_flight, 1) == 1 &&
        atomic_load(&h->freed_bytes) >= ((size_t)8 << 20)) {
        atomic_store(&h->freed_bytes, 0);
        malloc_trim(0);
    }
}

/* ---- connections: limits and the head deadline ---------------------------------------- */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    srv_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_track *t = cm_calloc(1, sizeof *t);
        if (t == NULL || ci == NULL) {
            cm_free(t); /* untracked: only the idle timeout applies */
            *socket_context = NULL;
            return;
        }
        t->fd = ci->connect_fd;
        t->t0 = cm_now();
        const union MHD_ConnectionInfo *pa =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (pa != NULL && pa->client_addr != NULL) {
            size_t pl = pa->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                               : sizeof(struct sockaddr_in);
            memcpy(&t->peer, pa->client_addr, pl);
        }
        pthread_mutex_lock(&h->conn_mu);
        t->next = h->conns;
        if (h->conns != NULL) {
            h->conns->prev = t;
        }
        h->conns = t;
        pthread_mutex_unlock(&h->conn_mu);
        *socket_context = t;
        return;
    }
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ai != NULL && ai->client_addr != NULL) {
        srv_gate_closed(h->gate, ai->client_addr);
    }
    conn_track *t = *socket_context;
    if (t == NULL) {
        return;
    }
    /* the fd is still open here: libmicrohttpd closes it after this call */
    pthread_mutex_lock(&h->conn_mu);
    if (t->prev != NULL) {
        t->prev->next = t->next;
    } else {
        h->conns = t->next;
    }
    if (t->next != NULL) {
        t->next->prev = t->prev;
    }
    pthread_mutex_unlock(&h->conn_mu);
    cm_free(t);
    *socket_context = NULL;
}

/* The connection's tracking record (NULL when untracked). */
static conn_track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

/* The head of c's request is complete (origin: its Origin header or
 * NULL); true when the watchdog has already answered it. */
static bool mark_head_done(srv_http *h, struct MHD_Connection *c, const char *origin)
{
    conn_track *t = track_of(c);
    bool cut = false;
    if (t != NULL) {
        pthread_mutex_lock(&h->conn_mu);
        t->head_done = true;
        t->t_head = cm_now();
        t->t_last = t->t_head;
        size_t n = origin != NULL ? strlen(origin) : 0;
        n = n < sizeof t->origin ? n : 0;
        memcpy(t->origin, origin != NULL ? origin : "", n);
        t->origin[n] = '\0';
        cut = t->cut;
        pthread_mutex_unlock(&h->conn_mu);
    }
    return cut;
}

/* Body progress for the watchdog: n more bytes, or done; true when the
 * watchdog has answered the request (the caller then discards). */
static bool mark_body(srv_http *h, struct MHD_Connection *c, size_t n, bool done)
{
    conn_track *t = track_of(c);
    bool cut = false;
    if (t != NULL) {
        pthread_mutex_lock(&h->conn_mu);
        t->got += n;
        t->t_last = n > 0 ? cm_now() : t->t_last;
        t->body_done = t->body_done || (done && !t->cut);
        cut = t->cut;
        pthread_mutex_unlock(&h->conn_mu);
    }
    return cut;
}

/* A response to c's current request is queued: the watchdog must not
 * write one of its own. */
static void mark_answered(srv_http *h, struct MHD_Connection *c)
{
    conn_track *t = track_of(c);
    if (t != NULL) {
        pthread_mutex_lock(&h->conn_mu);
        t->answered = true;
        pthread_mutex_unlock(&h->conn_mu);
    }
}

/* libmicrohttpd's URI log hook: the request line has arrived, so the
 * request has begun (a head deadline past it is answered, not silent). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)uri;
    srv_http *h = cls;
    conn_track *t = track_of(c);
    if (t != NULL) {
        pthread_mutex_lock(&h->conn_mu);
        t->line_seen = true;
        pthread_mutex_unlock(&h->conn_mu);
    }
    return NULL; /* on_request makes the srv_req */
}

/* Whether t is overdue: its head not complete head_timeout_s after it
 * started, or its body arriving slower, on average after that grace, than
 * min_body_rate bytes a second, or no body byte for nearly the idle
 * timeout (half a second before libmicrohttpd's own would close it
 * without an answer). */
static bool overdue(const srv_http *h, const conn_track *t, double now)
{
    if (!t->head_done) {
        return now - t->t0 > h->o.head_timeout_s;
    }
    if (t->body_done) {
        return false;
    }
    if (h->o.idle_timeout_s > 0 && now - t->t_last > (double)h->o.idle_timeout_s - 0.5) {
        return true;
    }
    if (h->o.min_body_rate == 0) {
        return false;
    }
    return now - t->t_head > h->o.head_timeout_s + (double)t->got / (double)h->o.min_body_rate;
}

/* How long the watchdog's 408 is given to reach the client before the
 * connection is shut down (a close with unread input would reset it). */
#define CUT_LINGER_S 1.0

/* The watchdog's answer to t's overdue request: 408 request_timeout, the
 * JSON document and CORS headers from the refuse hook, Connection: close;
 * then the sending side is shut. Under conn_mu; the request has no
 * response queued, so libmicrohttpd writes nothing on the socket. */
static void answer_timeout(srv_http *h, conn_track *t, double now, const char *message)
{
    char body[1024], hdrs[512], out[2048];
    hdrs[0] = '\0';
    srv_gate_refusal x = {.status = 408,
                          .message = message,
                          .peer = (const struct sockaddr *)&t->peer,
                          .method = "",
                          .target = "",
                          .origin = t->origin,
                          .dur_s = now - t->t0};
    size_t bl = gate_refuse(h, &x, body, sizeof body, hdrs, sizeof hdrs);
    size_t n = srv_gate_answer_format(408, hdrs, body, bl, out, sizeof out);
    if (n > 0) {
        ssize_t w = send(t->fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w; /* a client that does not read loses its answer */
    }
    shutdown(t->fd, SHUT_WR);
}

/* The watchdog: four times a second, cuts every connection whose request
 * head or body is overdue. A request that has begun (its request line
 * arrived) and has no response queued is answered 408 first and shut down
 * CUT_LINGER_S later, its further input discarded meanwhile; an idle
 * connection (nothing of a next request) is shut down at once, silently
 * (RFC 9112 9.5: a 408 there could cross a request the client is sending).
 * shutdown(2) wakes libmicrohttpd's poll on the socket, which then closes
 * the connection as the client's. */
static void *watchdog(void *arg)
{
    srv_http *h = arg;
    pthread_mutex_lock(&h->conn_mu);
    while (!h->watch_stop) {
        double now = cm_now();
        for (conn_track *t = h->conns; t != NULL; t = t->next) {
            if (t->cut) {
                if (t->linger_until > 0 && now >= t->linger_until) {
                    shutdown(t->fd, SHUT_RDWR);
                    t->linger_until = 0;
                }
                continue;
            }
            if (!overdue(h, t, now)) {
                continue;
            }
            t->cut = true;
            if ((t->line_seen || t->head_done) && !t->answered) {
                answer_timeout(h, t, now,
                               t->head_done ? "the request body did not arrive in time"
                                            : "the request head did not arrive in time");
                t->linger_until = now + CUT_LINGER_S;
            } else {
                shutdown(t->fd, SHUT_RDWR);
            }
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250 * 1000 * 1000;
        if (until.tv_nsec >= 1000 * 1000 * 1000) {
            until.tv_sec++;
            until.tv_nsec -= 1000 * 1000 * 1000;
        }
        pthread_cond_timedwait(&h->conn_cv, &h->conn_mu, &until);
    }
    pthread_mutex_unlock(&h->conn_mu);
    return NULL;
}

/* Counts n more body bytes for r against the server-wide cap; false (and
 * nothing counted) when they do not fit. */
static bool reserve(srv_req *r, size_t n)
{
    srv_http *h = r->h;
    size_t cap = h->o.max_inflight_body_bytes;
    size_t now = atomic_fetch_add(&h->body_bytes, n) + n;
    if (cap > 0 && now > cap) {
        atomic_fetch_sub(&h->body_bytes, n);
        return false;
    }
    r->reserved += n;
    return true;
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
    mark_answered(r->h, r->conn);
    return MHD_queue_response(r->conn, r->status, r->resp);
}

/* What the framing check has seen of a head's Content-Length and
 * Transfer-Encoding headers. */
typedef struct framing {
    unsigned n_cl;  /* Content-Length headers */
    bool cl_differ; /* ... with more than one value */
    const char *cl; /* the first one's value */
    bool te;        /* a Transfer-Encoding header */
    unsigned n_host; /* Host headers */
} framing;

static enum MHD_Result framing_scan(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    framing *fr = cls;
    if (key == NULL || value == NULL) {
        return MHD_YES;
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (fr->n_cl > 0 && strcmp(fr->cl, value) != 0) {
            fr->cl_differ = true;
        }
        if (fr->n_cl == 0) {
            fr->cl = value;
        }
        fr->n_cl++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        fr->te = true;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        fr->n_host++;
    }
    return MHD_YES;
}

/* Why the head of c frames its body ambiguously, or NULL when it does not.
 * libmicrohttpd 0.9.75 takes one of several differing Content-Length
 * headers, and one of Content-Length and Transfer-Encoding when both come;
 * a proxy in front may have taken the other, so the rest of the stream
 * could be read as a different request (RFC 9112 6.3 items 3 and 5: an
 * error, and the connection is closed). Also why its Host is wrong: an
 * HTTP/1.1 request must carry exactly one Host header, any request at most
 * one (RFC 9112 3.2: the server answers 400). */
static const char *framing_error(struct MHD_Connection *c, const char *version)
{
    framing fr = {0, false, NULL, false, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, framing_scan, &fr);
    if (fr.cl_differ) {
        return "the request has Content-Length headers with different values";
    }
    if (fr.n_cl > 0 && fr.te) {
        return "the request has both Content-Length and Transfer-Encoding";
    }
    if (fr.n_host > 1) {
        return "the request has more than one Host header";
    }
    if (fr.n_host == 0 && version != NULL && strcmp(version, MHD_HTTP_VERSION_1_1) == 0) {
        return "an HTTP/1.1 request must have a Host header";
    }
    return NULL;
}

/* ---- handler threads (srv_req_defer) ------------------------------------------------ */

/* A handler thread: runs the deferred requests' handlers again, each with
 * its connection suspended, and resumes the connection (libmicrohttpd then
 * calls on_request again, which queues the reply). r is not touched after
 * the resume: the polling thread may complete and free it at once. */
static void *off_main(void *arg)
{
    srv_http *h = arg;
    pthread_mutex_lock(&h->off_mu);
    for (;;) {
        while (h->off_head == NULL && !h->off_stop) {
            pthread_cond_wait(&h->off_cv, &h->off_mu);
        }
        srv_req *r = h->off_head;
        if (r == NULL) {
            break; /* stopping, and nothing left */
        }
        h->off_head = r->off_next;
        if (h->off_head == NULL) {
            h->off_tail = NULL;
        }
        h->off_queued--;
        pthread_mutex_unlock(&h->off_mu);
        struct MHD_Connection *c = r->conn;
        r->on_handler = true;
        h->o.handler(h->o.cls, r);
        pthread_mutex_lock(&h->off_mu);
        if (r->off_slot != NULL) {
            r->off_slot->n--;
            r->off_slot = NULL;
        }
        pthread_mutex_unlock(&h->off_mu);
        MHD_resume_connection(c);
        pthread_mutex_lock(&h->off_mu);
    }
    pthread_mutex_unlock(&h->off_mu);
    return NULL;
}

/* The slot counting the deferred requests of r's client (its principal,
 * else its address), taking a free one for a client that has none; NULL
 * when that client has handler_per_client already (or no slot is free,
 * which the slot count rules out). Under off_mu. */
static off_client *client_slot(srv_http *h, const srv_req *r)
{
    char key[sizeof h->off_clients[0].key];
    if (r->principal != NULL) {
        snprintf(key, sizeof key, "%s", r->principal);
    } else {
        char addr[64];
        remote_text(r->conn, addr, sizeof addr);
        snprintf(key, sizeof key, "ip:%s", addr);
    }
    off_client *free_slot = NULL;
    for (unsigned i = 0; i < h->n_off_clients; i++) {
        off_client *s = &h->off_clients[i];
        if (s->n > 0 && strcmp(s->key, key) == 0) {
            return s->n < h->o.handler_per_client ? s : NULL;
        }
        if (s->n == 0 && free_slot == NULL) {
            free_slot = s;
        }
    }
    if (free_slot != NULL) {
        memcpy(free_slot->key, key, sizeof key);
    }
    return free_slot;
}

/* Suspends r's connection and queues r for a handler thread (from
 * on_request, on the polling thread); false when the queue is full, r's
 * client has handler_per_client deferred requests already (then
 * r->overloaded_client) or the server is stopping (nothing done). */
static bool off_push(srv_http *h, srv_req *r)
{
    pthread_mutex_lock(&h->off_mu);
    bool ok = !h->off_stop && h->off_queued < h->o.handler_queue;
    off_client *slot = NULL;
    if (ok && h->o.handler_per_client > 0 && h->off_clients != NULL) {
        slot = client_slot(h, r);
        ok = slot != NULL;
        r->overloaded_client = !ok;
    }
    if (ok) {
        if (slot != NULL) {
            slot->n++;
        }
        r->off_slot = slot;
        /* suspended before any handler thread can see r, so that its
         * resume always follows */
        MHD_suspend_connection(r->conn);
        r->off_next = NULL;
        if (h->off_tail != NULL) {
            h->off_tail->off_next = r;
        } else {
            h->off_head = r;
        }
        h->off_tail = r;
        h->off_queued++;
        pthread_cond_signal(&h->off_cv);
    }
    pthread_mutex_unlock(&h->off_mu);
    return ok;
}

/* Starts o.handler_threads handler threads; false when none could start
 * (those started are stopped by srv_http_stop). */
static bool off_start(srv_http *h)
{
    pthread_mutex_init(&h->off_mu, NULL);
    pthread_cond_init(&h->off_cv, NULL);
    unsigned n = h->o.handler_threads;
    if (n == 0) {
        return true;
    }
    /* a slot per request that can be deferred at once: never short */
    h->n_off_clients = h->o.handler_queue + n;
    h->off_clients = cm_calloc(h->n_off_clients, sizeof *h->off_clients);
    if (h->off_clients == NULL) {
        return false;
    }
    h->off_threads = cm_calloc(n, sizeof *h->off_threads);
    for (unsigned i = 0; h->off_threads != NULL && i < n; i++) {
        if (pthread_create(&h->off_threads[i], NULL, off_main, h) != 0) {
            break;
        }
        h->n_off++;
    }
    return h->n_off > 0;
}

/* Lets the handler threads run what is queued, then joins them. */
static void off_stop(srv_http *h)
{
    pthread_mutex_lock(&h->off_mu);
    h->off_stop = true;
    pthread_cond_broadcast(&h->off_cv);
    pthread_mutex_unlock(&h->off_mu);
    for (unsigned i = 0; i < h->n_off; i++) {
        pthread_join(h->off_threads[i], NULL);
    }
    cm_free(h->off_threads);
    cm_free(h->off_clients);
    pthread_mutex_destroy(&h->off_mu);
    pthread_cond_destroy(&h->off_cv);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
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
        r->fd = -1;
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (fi != NULL) {
            r->fd = fi->connect_fd;
        }
        cm_arena_init(&r->arena, 4096);
        cm_buf_init(&r->body);
        *con_cls = r;
        atomic_fetch_add(&h->in_flight, 1);
        if (mark_head_done(h, c,
                           MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"))) {
            r->cut = true; /* answered 408 while the head came: discard, then close */
            r->handled = true;
            return MHD_YES;
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_TRANSFER_ENCODING);
        unsigned long long n = cl != NULL ? strtoull(cl, NULL, 10) : 0;
        /* Every early answer below is queued now: MHD closes the
         * connection after it rather than read the body. */
        r->bad_head = framing_error(c, version);
        if (r->bad_head != NULL) {
            r->handled = true;
            srv_req_add_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
            h->o.handler(h->o.cls, r);
            return queue(r);
        }
        if ((n > 0 || te != NULL) && h->o.early != NULL && !h->o.early(h->o.cls, r)) {
            r->handled = true;
            return queue(r);
        }
        if (n > h->o.max_body_bytes) {
            r->too_large = true;
            r->handled = true;
            h->o.handler(h->o.cls, r);
            return queue(r);
        }
        if (n > 0 && !reserve(r, (size_t)n)) {
            r->busy = true;
            r->handled = true;
            h->o.handler(h->o.cls, r);
            return queue(r);
        }
        if (n > 0 && !cm_buf_reserve(&r->body, (size_t)n)) {
            r->oom = true;
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        r->cut = mark_body(h, c, n, false) || r->cut;
        if (r->handled || r->cut) {
            return MHD_YES; /* already answered; discard */
        }
        if (r->body.len + n > h->o.max_body_bytes) {
            r->too_large = true;
            r->handled = true;
            h->o.handler(h->o.cls, r);
            return queue(r);
        }
        if (r->body.len + n > r->reserved && !reserve(r, r->body.len + n - r->reserved)) {
            r->busy = true; /* a chunked body grew past the server-wide cap */
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
    r->cut = mark_body(h, c, 0, true) || r->cut;
    if (r->cut && !r->queued) {
        return MHD_NO; /* the watchdog answered 408: close, never run the handler */
    }
    if (r->handled) {
        return r->queued ? MHD_YES : queue(r); /* also: back from a handler thread */
    }
    r->handled = true;
    r->t_ready = cm_now();
    h->o.handler(h->o.cls, r);
    if (r->defer) {
        r->defer = false;
        if (off_push(h, r)) {
            return MHD_YES; /* suspended until its handler has run again */
        }
        r->overloaded = true;
        h->o.handler(h->o.cls, r);
    }
    return queue(r);
}

/* ---- start / stop ------------------------------------------------------------------ */

/* The gate's hand-off: libmicrohttpd takes the connection (and closes it
 * when it cannot). */
static void gate_hand(void *cls, int fd, const struct sockaddr *sa, socklen_t len)
{
    srv_http *h = cls;
    if (MHD_add_connection(h->d, fd, sa, len) != MHD_YES) {
        srv_gate_closed(h->gate, sa);
    }
}

/* The request-log line of a request refused before any handler ran:
 * route "-", "refused":true and, when by_library is not NULL,
 * "by":"libmicrohttpd" with by_library as its message. */
static void log_refusal(const srv_http *h, const char *remote, const char *method, const char *path,
                        unsigned status, size_t bytes_out, double dur_s, const char *by_library)
{
    char line[1024], ts[40];
    log_ts(ts, sizeof ts);
    size_t at = (size_t)snprintf(line, sizeof line,
                                 "{\"ts\":\"%s\",\"remote\":\"%s\",\"method\":", ts, remote);
    at = put_json_str(line, sizeof line - 600, at, method);
    at += (size_t)snprintf(line + at, sizeof line - at, ",\"path\":");
    at = put_json_str(line, sizeof line - 400, at, path);
    at += (size_t)snprintf(line + at, sizeof line - at,
                           ",\"route\":\"-\",\"status\":%u,\"bytes_in\":0,\"bytes_out\":%zu,"
                           "\"ms\":%.3f,\"refused\":true",
                           status, bytes_out, dur_s * 1e3);
    if (by_library != NULL) {
        at +=
            (size_t)snprintf(line + at, sizeof line - at, ",\"by\":\"libmicrohttpd\",\"message\":");
        at = put_json_str(line, sizeof line - 8, at, by_library);
    }
    at += (size_t)snprintf(line + at, sizeof line - at, "}\n");
    if (at > sizeof line) {
        at = sizeof line;
    }
    ssize_t w = write(h->o.log_fd, line, at);
    (void)w;
}

/* The gate's refusal: the document from the application, and the log line. */
static size_t gate_refuse(void *cls, const srv_gate_refusal *x, char *buf, size_t cap,
                          char *hdrs, size_t hcap)
{
    srv_http *h = cls;
    size_t n = h->o.refuse != NULL ? h->o.refuse(h->o.cls, x->status, x->message, x->origin, buf,
                                                 cap, hdrs, hcap)
                                   : 0;
    if (h->o.log_fd < 0) {
        return n;
    }
    char remote[64] = "-";
    if (x->peer->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)x->peer)->sin_addr, remote,
                  sizeof remote);
    } else if (x->peer->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)x->peer)->sin6_addr,
                  remote, sizeof remote);
    }
    log_refusal(h, remote, x->method, x->target, x->status, n, x->dur_s, NULL);
    return n;
}

/* libmicrohttpd's own messages (MHD_OPTION_EXTERNAL_LOGGER), which it would
 * otherwise print to stderr as free text, HTML pages included, between the
 * request log's JSON lines. An answer its parser sent by itself ("Error
 * processing request (HTTP response code is N (...))": a malformed head of
 * a later request on a kept-alive connection, which the gate never saw)
 * becomes a request-log line like the gate's refusals, "by":"libmicrohttpd"
 * with the cause it logged just before on the same thread, and is counted;
 * any other message is printed as "shardplan: libmicrohttpd: MESSAGE" and
 * kept as that cause. */
static _Thread_local char mhd_cause[256];
static _Thread_local double mhd_cause_at; /* cm_now() when it was logged */

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    srv_http *h = cls;
    char msg[512];
    int len = vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = len < 0 ? 0 : (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1;
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) {
        n--;
    }
    msg[n] = '\0';
    static const char marker[] = "HTTP response code is ";
    const char *p = strstr(msg, marker);
    unsigned long status = p != NULL ? strtoul(p + sizeof marker - 1, NULL, 10) : 0;
    if (status < 400 || status > 599) {
        size_t c = n < sizeof mhd_cause - 1 ? n : sizeof mhd_cause - 1;
        memcpy(mhd_cause, msg, c);
        mhd_cause[c] = '\0';
        mhd_cause_at = cm_now();
        char line[600];
        int k = snprintf(line, sizeof line, "shardplan: libmicrohttpd: %s\n", msg);
        ssize_t w = write(STDERR_FILENO, line,
                          k < 0                  ? 0
                          : k < (int)sizeof line ? (size_t)k
                                                 : sizeof line - 1);
        (void)w;
        return;
    }
    if (h->o.library_refused != NULL) {
        h->o.library_refused(h->o.cls, (unsigned)status);
    }
    if (h->o.log_fd >= 0) {
        /* the cause is logged just before, in the same call of the parser */
        bool fresh = mhd_cause[0] != '\0' && cm_now() - mhd_cause_at < 0.05;
        log_refusal(h, "-", "-", "-", (unsigned)status, 0, 0,
                    fresh ? mhd_cause : "a malformed request head (libmicrohttpd's answer)");
    }
    mhd_cause[0] = '\0';
}

/* A listening, non-blocking TCP socket bound to ss; -1 and errno on failure. */
static int listen_on(const struct sockaddr_storage *ss, socklen_t len)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (ss->ss_family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    }
    if (bind(fd, (const struct sockaddr *)(const void *)ss, len) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

cm_status srv_http_start(const srv_http_opts *o, srv_http **out, cm_error *err)
{
    *out = NULL;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME;
    socklen_t ss_len = sizeof(struct sockaddr_in);
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
        ss_len = sizeof(struct sockaddr_in6);
    } else {
        return cm_error_set(err, CM_EINVAL, NULL, "listen address '%s' is not a numeric IP",
                            o->host);
    }
    srv_http *h = cm_calloc(1, sizeof *h);
    if (h == NULL) {
        return cm_error_oom(err);
    }
    h->listen_fd = listen_on(&ss, ss_len);
    if (h->listen_fd < 0) {
        int e = errno;
        cm_free(h);
        return cm_error_set(err, CM_EIO, NULL, "cannot listen on %s:%u: %s", o->host,
                            (unsigned)o->port, strerror(e));
    }
    h->o = *o;
    atomic_init(&h->in_flight, 0);
    atomic_init(&h->body_bytes, 0);
    atomic_init(&h->freed_bytes, 0);
    pthread_mutex_init(&h->conn_mu, NULL);
    pthread_cond_init(&h->conn_cv, NULL);
    unsigned threads = o->threads > 0 ? o->threads : 1;
    /* The gate counts connections in total and per address, from accept to
     * close; libmicrohttpd's own limit (shared out among its threads) has
     * room over it, since it forgets a connection a moment after telling us
     * it has closed. */
    unsigned max_conn = o->max_connections > 0 ? o->max_connections : 1000u;
    unsigned mhd_max = max_conn + max_conn / 4 + 4 * threads;
    if (!off_start(h)) {
        off_stop(h);
        close(h->listen_fd);
        pthread_mutex_destroy(&h->conn_mu);
        pthread_cond_destroy(&h->conn_cv);
        cm_free(h);
        return cm_error_set(err, CM_EIO, NULL, "cannot start the handler threads");
    }
    /* the logger first, so that it gets every message */
    h->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
        MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT, mhd_max,
        MHD_OPTION_END);
    srv_gate_opts go = {
        .listen_fd = h->listen_fd,
        .max_connections = max_conn,
        .max_per_ip = o->max_per_ip,
        .head_timeout_s = o->head_timeout_s > 0    ? o->head_timeout_s
                          : o->idle_timeout_s > 0 ? (double)o->idle_timeout_s
                                                  : 60.0,
        .hand = gate_hand,
        .refuse = gate_refuse,
        .cls = h,
    };
    cm_error gerr;
    cm_error_clear(&gerr);
    if (h->d != NULL && srv_gate_start(&go, &h->gate, &gerr) != CM_OK) {
        MHD_stop_daemon(h->d);
        off_stop(h);
        close(h->listen_fd);
        pthread_mutex_destroy(&h->conn_mu);
        pthread_cond_destroy(&h->conn_cv);
        cm_free(h);
        if (err != NULL) {
            *err = gerr;
        }
        return gerr.code;
    }
    if (h->d == NULL) {
        int e = errno;
        off_stop(h);
        close(h->listen_fd);
        pthread_mutex_destroy(&h->conn_mu);
        pthread_cond_destroy(&h->conn_cv);
        cm_free(h);
        return cm_error_set(err, CM_EIO, NULL, "cannot listen on %s:%u: %s", o->host,
                            (unsigned)o->port, e != 0 ? strerror(e) : "libmicrohttpd failed");
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    h->port = o->port;
    if (getsockname(h->listen_fd, (struct sockaddr *)&bound, &bl) == 0) {
        h->port = bound.ss_family == AF_INET6
                      ? ntohs(((const struct sockaddr_in6 *)(const void *)&bound)->sin6_port)
                      : ntohs(((const struct sockaddr_in *)(const void *)&bound)->sin_port);
    }
    if (o->head_timeout_s > 0) {
        h->watch_running = pthread_create(&h->watch, NULL, watchdog, h) == 0;
    }
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
    /* The gate stops accepting and closes what it holds; libmicrohttpd never
     * sees the listen socket (MHD_USE_NO_LISTEN_SOCKET), so closing it now
     * cannot race its threads. New connections are refused from here. */
    srv_gate_stop(h->gate);
    close(h->listen_fd);
    double until = cm_now() + drain_s;
    while (atomic_load(&h->in_flight) > 0 && cm_now() < until) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (h->o.drained != NULL) {
        h->o.drained(h->o.cls);
    }
    /* deferred handlers still running were told to stop (drained); those
     * queued run now and see the same; every connection is resumed before
     * the daemon stops */
    off_stop(h);
    if (h->watch_running) {
        pthread_mutex_lock(&h->conn_mu);
        h->watch_stop = true;
        pthread_cond_signal(&h->conn_cv);
        pthread_mutex_unlock(&h->conn_mu);
        pthread_join(h->watch, NULL);
    }
    MHD_stop_daemon(h->d);
    srv_gate_free(h->gate); /* after the daemon: its connections report their close */
    pthread_mutex_destroy(&h->conn_mu);
    pthread_cond_destroy(&h->conn_cv);
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

bool srv_req_defer(srv_req *r)
{
    if (r->on_handler || r->overloaded || r->h->n_off == 0) {
        return false;
    }
    r->defer = true;
    r->hdrs = NULL; /* arena copies: added again when it runs again */
    if (r->resp != NULL) {
        MHD_destroy_response(r->resp);
        r->resp = NULL;
    }
    return true;
}

bool srv_req_on_handler_thread(const srv_req *r)
{
    return r->on_handler;
}

bool srv_req_overloaded(const srv_req *r)
{
    return r->overloaded;
}

bool srv_req_overloaded_client(const srv_req *r)
{
    return r->overloaded_client;
}

bool srv_req_body_busy(const srv_req *r)
{
    return r->busy;
}

const char *srv_req_head_error(const srv_req *r)
{
    return r->bad_head;
}

void srv_req_set_authorized(srv_req *r)
{
    r->authorized = true;
}

bool srv_req_authorized(const srv_req *r)
{
    return r->authorized;
}

bool srv_req_client_gone(const srv_req *r)
{
    if (r->fd < 0) {
        return false;
    }
    struct pollfd p = {.fd = r->fd, .events = POLLRDHUP, .revents = 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
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

double srv_req_ready_at(const srv_req *r)
{
    return r->t_ready > 0 ? r->t_ready : r->t0;
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

const char *srv_req_principal(const srv_req *r)
{
    return r->principal;
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

bool srv_req_has_resp_header(const srv_req *r, const char *name)
{
    for (const hdr *x = r->hdrs; x != NULL; x = x->next) {
        if (strcasecmp(x->name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* ---- replies, gzip-coded when asked ---------------------------------------------------------- */

/* Below this many bytes a reply goes out as it is: gzip's frame and the
 * deflate call cost more than the few bytes they save (one packet). */
#define GZIP_MIN_BYTES 1024
/* zlib's fastest level, nginx's default: a JSON plan still shrinks about
 * eightfold, and a 6.8 MB plan is coded in tens of milliseconds. */
#define GZIP_LEVEL 1

/* Whether content_type is one of the documents the server codes: JSON and
 * MLIR (parameters after ';' ignored). */
static bool ctype_compressible(const char *ctype)
{
    static const char *const types[] = {"application/json", "application/mlir"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t n = strlen(types[i]);
        if (strncasecmp(ctype, types[i], n) == 0 && (ctype[n] == '\0' || ctype[n] == ';')) {
            return true;
        }
    }
    return false;
}

/* Whether the request's Accept-Encoding lists gzip (or x-gzip, or *) with a
 * q-value other than 0 (RFC 9110 12.5.3). */
static bool accepts_gzip(const srv_req *r)
{
    const char *s = srv_req_header(r, "Accept-Encoding");
    if (s == NULL) {
        return false;
    }
    bool star = false, gzip = false, gzip_named = false;
    while (*s != '\0') {
        while (*s == ' ' || *s == '\t' || *s == ',') {
            s++;
        }
        const char *tok = s;
        while (*s != '\0' && *s != ',' && *s != ';' && *s != ' ' && *s != '\t') {
            s++;
        }
        size_t n = (size_t)(s - tok);
        bool zero = false; /* q=0, q=0.0, q=0.00 ... */
        while (*s != '\0' && *s != ',') {
            if (*s == 'q' || *s == 'Q') {
                const char *q = s + 1;
                while (*q == ' ' || *q == '\t') {
                    q++;
                }
                if (*q == '=') {
                    q++;
                    while (*q == ' ' || *q == '\t') {
                        q++;
                    }
                    if (*q == '0') {
                        q++;
                        if (*q == '.') {
                            q++;
                        }
                        while (*q == '0') {
                            q++;
                        }
                        zero = *q == '\0' || *q == ',' || *q == ';' || *q == ' ' || *q == '\t';
                    }
                }
            }
            s++;
        }
        if ((n == 4 && strncasecmp(tok, "gzip", 4) == 0) ||
            (n == 6 && strncasecmp(tok, "x-gzip", 6) == 0)) {
            gzip_named = true;
            gzip = gzip || !zero;
        } else if (n == 1 && tok[0] == '*') {
            star = !zero;
        }
    }
    return gzip || (!gzip_named && star);
}

static void *z_alloc(void *opaque, uInt items, uInt size)
{
    (void)opaque;
    return size != 0 && items > SIZE_MAX / size ? NULL : cm_alloc((size_t)items * size);
}

static void z_free(void *opaque, void *p)
{
    (void)opaque;
    cm_free(p);
}

/* body (len bytes) as one gzip member (RFC 1952) in a cm_alloc buffer, its
 * length in *out_len; NULL when zlib fails, memory runs out or the coded
 * form would not be smaller. */
static char *gzip_body(const char *body, size_t len, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    z.zalloc = z_alloc;
    z.zfree = z_free;
    /* windowBits 15 + 16: a gzip header and trailer instead of zlib's */
    if (deflateInit2(&z, GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return NULL;
    }
    if (len > (1u << 30)) {
        deflateEnd(&z);
        return NULL; /* uInt counts; no reply is this large */
    }
    /* room for len bytes only: a result that does not fit is not worth sending */
    char *out = cm_alloc(len);
    if (out == NULL) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)(uintptr_t)body;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)len;
    int rc = deflate(&z, Z_FINISH);
    size_t done = len - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        cm_free(out);
        return NULL;
    }
    *out_len = done;
    return out;
}

/* Decides the coding of r's reply: notes whether it varies with
 * Accept-Encoding and returns the gzip form of body (cm_alloc; its length in
 * *out_len) when the client accepts it, or NULL to send body as it is. */
static char *encode(srv_req *r, unsigned status, const char *ctype, const char *body, size_t len,
                    size_t *out_len)
{
    r->vary_encoding = false; /* a reply replacing an earlier one decides afresh */
    r->gzipped = false;
    if (status == 304 && ctype_compressible(ctype)) {
        /* the validators a 200 would carry */
        r->vary_encoding = true;
        r->gzipped = accepts_gzip(r);
        return NULL;
    }
    if (len < GZIP_MIN_BYTES || status == 204 || !ctype_compressible(ctype)) {
        return NULL;
    }
    r->vary_encoding = true;
    if (!accepts_gzip(r)) {
        return NULL;
    }
    char *gz = gzip_body(body, len, out_len);
    r->gzipped = gz != NULL;
    return gz;
}

/* Adds one header to resp, with the coding's changes: Vary gains
 * Accept-Encoding, a strong ETag of a gzip-coded reply becomes weak. */
static void add_header(const srv_req *r, struct MHD_Response *resp, const char *name,
                       const char *value, bool *vary_done)
{
    char buf[512];
    if (r->vary_encoding && strcasecmp(name, "Vary") == 0 && !*vary_done) {
        snprintf(buf, sizeof buf, "%s, Accept-Encoding", value);
        MHD_add_response_header(resp, name, buf);
        *vary_done = true;
        return;
    }
    if (r->gzipped && strcasecmp(name, "ETag") == 0 && value[0] == '"') {
        snprintf(buf, sizeof buf, "W/%s", value);
        MHD_add_response_header(resp, name, buf);
        return;
    }
    MHD_add_response_header(resp, name, value);
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
    bool vary_done = false;
    for (const hdr *x = r->hdrs; x != NULL; x = x->next) {
        add_header(r, resp, x->name, x->value, &vary_done);
    }
    if (r->vary_encoding && !vary_done) {
        MHD_add_response_header(resp, "Vary", "Accept-Encoding");
    }
    if (r->gzipped && status != 304) {
        MHD_add_response_header(resp, "Content-Encoding", "gzip");
    }
    r->resp = resp;
    r->status = status;
    r->resp_len = len;
}

/* A response taking the gzip body gz (len bytes; freed with it). */
static struct MHD_Response *gz_response(char *gz, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, gz,
                                                                                   cm_free);
    if (resp == NULL) {
        cm_free(gz);
    }
    return resp;
}

void srv_req_reply(srv_req *r, unsigned status, const char *content_type, const char *body,
                   size_t len)
{
    size_t gz_len = 0;
    char *gz = encode(r, status, content_type, body, len, &gz_len);
    if (gz != NULL) {
        finish(r, gz_response(gz, gz_len), status, content_type, gz_len);
        return;
    }
    finish(r,
           MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_PERSISTENT),
           status, content_type, len);
}

void srv_req_reply_take(srv_req *r, unsigned status, const char *content_type, char *body,
                        size_t len)
{
    size_t gz_len = 0;
    char *gz = encode(r, status, content_type, body, len, &gz_len);
    if (gz != NULL) {
        cm_free(body);
        finish(r, gz_response(gz, gz_len), status, content_type, gz_len);
        return;
    }
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
    size_t gz_len = 0;
    char *gz = encode(r, status, content_type, body, len, &gz_len);
    if (gz != NULL) {
        release(ctx);
        finish(r, gz_response(gz, gz_len), status, content_type, gz_len);
        return;
    }
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
