/* SPDX-License-Identifier: Apache-2.0
 * server: the one wrapper around libmicrohttpd. It owns the daemon (a pool of
 * polling threads), gives each request an srv_req with its own cm_arena and
 * accumulated body, enforces the body size limit (413) and the idle timeout,
 * queues responses on a later call than the first (keep-alive stays on, see
 * MACHINE-NOTES.md), logs one structured line per request and drains
 * in-flight requests on stop. Connections are accepted by its gate
 * (srv_gate.h), which answers a malformed first request head with the JSON
 * error from the refuse hook before libmicrohttpd sees it. No MHD type
 * appears in this header.
 * Ownership: an srv_req and everything in its arena live until the request
 * completes; the handler never frees them. Thread contract: the handler runs
 * on pool threads, concurrently for different requests, and again on one of
 * the handler threads for a request it defers (srv_req_defer), with the
 * connection suspended meanwhile, so that a long computation never holds a
 * polling thread and the other connections it serves; srv_http_stop is
 * called once, from one thread. */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include "cm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct srv_http srv_http;
typedef struct srv_req srv_req;

/* Called once per request, when the whole body has arrived. It must reply
 * (srv_req_reply*) before returning; a request without a reply gets 500. */
typedef void (*srv_http_handler)(void *cls, srv_req *r);

/* Called once per request when it has completed (response sent or
 * connection lost): status is the HTTP status sent (0 if none), dur_s the
 * seconds since the request arrived. For metrics. */
typedef void (*srv_http_done)(void *cls, const srv_req *r, unsigned status, double dur_s);

/* Called once the head of a request that announces a body (Content-Length
 * above 0, or Transfer-Encoding) is complete, before any body byte is kept:
 * true lets the body in; false means it has replied (a 401, say), and the
 * body is then discarded and the connection closed after the reply. */
typedef bool (*srv_http_early)(void *cls, srv_req *r);

typedef struct srv_http_opts {
    const char *host;          /* numeric IPv4 or IPv6 address to bind */
    uint16_t port;             /* 0: a free port (srv_http_port tells which) */
    unsigned threads;          /* polling threads in the pool, >= 1 */
    size_t max_body_bytes;     /* larger bodies get 413 */
    unsigned idle_timeout_s;   /* a connection idle this long is closed (0: never) */
    int log_fd;                /* one JSON line per request; -1: no log */
    srv_http_handler handler;
    srv_http_done done;        /* may be NULL */
    srv_http_early early;      /* may be NULL */
    unsigned handler_threads;  /* threads running deferred handlers (0: none, no deferral) */
    unsigned handler_queue;    /* deferred requests waiting for one, at most; past it the
                                  handler runs again at once with srv_req_overloaded true */
    unsigned handler_per_client;    /* deferred requests, waiting or running, of one client
                                       (its principal, else its address) at most; past it
                                       srv_req_overloaded_client (0: no limit) */
    size_t max_inflight_body_bytes; /* all bodies held at once; past it 503 (0: no cap) */
    unsigned max_connections;  /* open connections in total (0: 1000) */
    unsigned max_per_ip;       /* open connections per client address (0: no limit) */
    double head_timeout_s;     /* a request head (line and headers) must be complete this
                                  long after the connection opened or its previous reply;
                                  bytes do not extend it (0: no deadline after the first
                                  head, which gets idle_timeout_s, or 60 s) */
    size_t min_body_rate;      /* after that grace, a body must arrive at this many bytes a
                                  second on average, or the connection is cut (0: any rate);
                                  needs head_timeout_s > 0 */
    /* Writes the JSON error document (status, message) of a request refused
     * before it reached the handler (a malformed head, too many connections,
     * a head or body past its deadline) into buf (cap bytes) and returns its
     * length; and into hdrs (hcap bytes, NUL-terminated) the extra header
     * lines the answer carries, each ending in CRLF: the CORS headers for
     * origin (the request's Origin header, "" when none). Any thread. */
    size_t (*refuse)(void *cls, unsigned status, const char *message, const char *origin,
                     char *buf, size_t cap, char *hdrs, size_t hcap);
    /* Counts an answer libmicrohttpd's parser sent by itself (its own HTML
     * page, status status): a malformed head of a later request on a
     * kept-alive connection, which never passed the gate; may be NULL. Any
     * thread. */
    void (*library_refused)(void *cls, unsigned status);
    /* Called once from srv_http_stop when its drain time is over, before
     * the requests still running are waited for: the application tells its
     * computations to stop; may be NULL. */
    void (*drained)(void *cls);
    void *cls; /* passed to handler, done, refuse, library_refused and drained */
} srv_http_opts;

/* Starts listening. On success *out is a running server freed by
 * srv_http_stop. Errors: CM_EINVAL (bad address), CM_EIO (bind failed:
 * err->msg says why). */
cm_status srv_http_start(const srv_http_opts *o, srv_http **out, cm_error *err);

/* The bound TCP port. */
uint16_t srv_http_port(const srv_http *h);

/* Requests being served right now (arrived and not yet completed). */
unsigned srv_http_in_flight(const srv_http *h);

/* Stops accepting connections, waits up to drain_s seconds for in-flight
 * requests to complete, then closes every connection and frees h. NULL is a
 * no-op. */
void srv_http_stop(srv_http *h, double drain_s);

/* ---- the request ------------------------------------------------------------ */

const char *srv_req_method(const srv_req *r);
/* The path without the query string, percent-decoded by MHD. */
const char *srv_req_path(const srv_req *r);
/* A query argument (decoded) or NULL. */
const char *srv_req_query(const srv_req *r, const char *key);
/* A request header (case-insensitive name) or NULL. */
const char *srv_req_header(const srv_req *r, const char *name);
/* The body (NUL-terminated, possibly empty), valid for the request. */
const char *srv_req_body(const srv_req *r, size_t *len_out);
/* True when the body exceeded max_body_bytes (the handler must answer 413)
 * or could not be stored (answer 503); the body is incomplete then. */
bool srv_req_body_too_large(const srv_req *r);
bool srv_req_body_oom(const srv_req *r);
/* True when the body was refused because all in-flight bodies together
 * would pass max_inflight_body_bytes (the handler answers 503). */
bool srv_req_body_busy(const srv_req *r);
/* Asks for the handler to run again, from its start, on a handler thread
 * (the polling thread and its other connections are then free while it
 * computes): true when granted, and the handler must then return at once
 * without replying (the headers it added are dropped); false when it runs
 * on a handler thread already, when there are none, or when the handler
 * threads' queue was full: it goes on where it is. */
bool srv_req_defer(srv_req *r);
/* True when the handler runs on a handler thread (deferred). */
bool srv_req_on_handler_thread(const srv_req *r);
/* True when the handler runs again because a deferral found the handler
 * threads' queue full: it answers 503 without computing. */
bool srv_req_overloaded(const srv_req *r);
/* ... because its client (its principal when set, else its address) has
 * handler_per_client deferred requests waiting or running already. */
bool srv_req_overloaded_client(const srv_req *r);
/* Why the request's head frames its body ambiguously (differing
 * Content-Length headers, or Content-Length with Transfer-Encoding), or
 * NULL. The handler answers 400; the connection closes after the reply and
 * no body byte is read. The string is static. */
const char *srv_req_head_error(const srv_req *r);
size_t srv_req_max_body(const srv_req *r);
/* The request's arena, freed when the request completes. */
cm_arena *srv_req_arena(srv_req *r);
/* Client address as text ("127.0.0.1"). */
const char *srv_req_remote(const srv_req *r);
/* Seconds since the request arrived. */
double srv_req_elapsed(const srv_req *r);
/* When (cm_now()) the request was complete, its body read, and its handler
 * first ran: where its deadlines start, so that time waiting for a handler
 * thread (srv_req_defer) counts against them. */
double srv_req_ready_at(const srv_req *r);

/* Labels for the log line and metrics: the route name ("plans.get"), the
 * error code of an error reply, the id of the token used. Strings must live
 * as long as the request (static or arena). */
void srv_req_set_route(srv_req *r, const char *route, int route_index);
const char *srv_req_route(const srv_req *r);
int srv_req_route_index(const srv_req *r);
void srv_req_set_error_code(srv_req *r, const char *code);
const char *srv_req_error_code(const srv_req *r);
void srv_req_set_principal(srv_req *r, const char *who);
/* The principal set for the request log, or NULL. */
const char *srv_req_principal(const srv_req *r);
/* Marks the request's token as checked (by the early hook), so the handler
 * need not check it again. */
void srv_req_set_authorized(srv_req *r);
bool srv_req_authorized(const srv_req *r);
/* True when the client has gone (its connection closed or failed) while the
 * request is still being handled: long computations poll it to stop. Any
 * thread. */
bool srv_req_client_gone(const srv_req *r);
/* An opaque per-request slot for the handler's use. */
void srv_req_set_user(srv_req *r, void *p);
void *srv_req_user(const srv_req *r);

/* Adds a response header (copied). Call before srv_req_reply*. */
void srv_req_add_header(srv_req *r, const char *name, const char *value);
/* Whether a response header name (any case) has been added. */
bool srv_req_has_resp_header(const srv_req *r, const char *name);

/* Replies with body (len bytes), which must live as long as the request
 * (static, or in the request's arena): it is not copied. */
void srv_req_reply(srv_req *r, unsigned status, const char *content_type, const char *body,
                   size_t len);
/* Replies with a heap body (cm_alloc) that the response takes and frees. */
void srv_req_reply_take(srv_req *r, unsigned status, const char *content_type, char *body,
                        size_t len);
/* Replies with a shared body: release(ctx) is called once the response is
 * no longer needed (for reference-counted cached documents). */
void srv_req_reply_shared(srv_req *r, unsigned status, const char *content_type,
                          const char *body, size_t len, void (*release)(void *), void *ctx);
bool srv_req_has_reply(const srv_req *r);

#endif /* SRV_HTTP_H */
