/* SPDX-License-Identifier: Apache-2.0
 * server, private to srv_http: the accept gate. It owns the listen socket's
 * accept loop, counts open connections in total and per client address,
 * and holds each new connection until the head of its first request has
 * arrived (looked at with MSG_PEEK, nothing consumed), checks it against
 * RFC 9112 (request line, version, header lines, sizes, Host, body framing)
 * and either hands the connection on (to libmicrohttpd) or answers with
 * the documented JSON error itself and closes. No MHD type appears here.
 * Thread contract: one gate thread; srv_gate_closed may be called from any
 * thread. */
#ifndef SRV_GATE_H
#define SRV_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "cm.h"

typedef struct srv_gate srv_gate;

/* The limits on a request head the gate enforces (the connection's
 * libmicrohttpd memory pool, 32 KiB, holds a head of these sizes). */
#define SRV_GATE_LINE_MAX   8192u  /* request line, bytes: past it 414 */
#define SRV_GATE_HEAD_MAX   16384u /* line and header fields, bytes: past it 431 */
#define SRV_GATE_FIELDS_MAX 100u   /* header fields: past it 431 */

/* A request the gate refused, for the error document and the log. */
typedef struct srv_gate_refusal {
    unsigned status;             /* 400, 408, 414, 431, 501, 503 or 505 */
    const char *message;         /* plain ASCII, no client bytes */
    const struct sockaddr *peer; /* the client's address */
    const char *method;          /* raw bytes of the request line (NUL-free copy), maybe "" */
    const char *target;
    const char *origin; /* the head's Origin header (visible ASCII), or "" */
    double dur_s;       /* seconds since the connection was accepted */
} srv_gate_refusal;

typedef struct srv_gate_opts {
    int listen_fd;            /* bound, listening and non-blocking; not closed by the gate */
    unsigned max_connections; /* open at once, in the gate and handed on (>= 1) */
    unsigned max_per_ip;      /* per client address (0: no limit) */
    double head_timeout_s;    /* the first head must be complete this long after accept (> 0) */
    /* Takes a connection whose first head is valid; owns fd from then on
     * and reports its close with srv_gate_closed (also when it fails). */
    void (*hand)(void *cls, int fd, const struct sockaddr *sa, socklen_t len);
    /* Writes the JSON error document for x into buf (cap bytes) and
     * returns its length, and into hdrs (hcap bytes, NUL-terminated) the
     * extra header lines of the answer, each ending in CRLF (CORS); logs
     * and counts the refusal. Gate thread. */
    size_t (*refuse)(void *cls, const srv_gate_refusal *x, char *buf, size_t cap, char *hdrs,
                     size_t hcap);
    void *cls;
} srv_gate_opts;

/* Starts the gate thread. Errors: CM_ENOMEM, CM_EIO (thread or epoll). */
cm_status srv_gate_start(const srv_gate_opts *o, srv_gate **out, cm_error *err);

/* Stops accepting, closes every connection still held by the gate and
 * joins its thread. Connections already handed on are not touched and may
 * still report their close. NULL or a second call is a no-op. */
void srv_gate_stop(srv_gate *g);

/* Stops g if need be and frees it, once no handed-on connection can report
 * its close any more. NULL is a no-op. */
void srv_gate_free(srv_gate *g);

/* A connection handed on has closed: its address no longer counts. */
void srv_gate_closed(srv_gate *g, const struct sockaddr *sa);

/* The error answer: status line, Content-Type: application/json,
 * Content-Length, Retry-After for 503, the header lines hdrs (each ending
 * in CRLF, maybe ""), Connection: close and the body (bl bytes), into out
 * (cap bytes). Returns its length, 0 when it does not fit. Pure. */
size_t srv_gate_answer_format(unsigned status, const char *hdrs, const char *body, size_t bl,
                              char *out, size_t cap);

/* The value of the Origin header in the n bytes of a request head at buf
 * (as far as its complete lines go) into out (cap bytes): "" when there is
 * none, or when it is empty, longer than cap - 1 or not visible ASCII.
 * Pure. */
void srv_gate_find_origin(const char *buf, size_t n, char *out, size_t cap);

/* What srv_gate_check found in a request head. */
typedef enum srv_gate_verdict {
    SRV_GATE_MORE = 0, /* valid so far, incomplete */
    SRV_GATE_OK,       /* complete and valid: *head_len_out bytes */
    SRV_GATE_BAD       /* refuse with *status_out and the message in msg */
} srv_gate_verdict;

/* Checks the n bytes at buf, the start of a connection's input, as a
 * request head (RFC 9112 2-6). msg (msg_cap bytes) receives a static-text
 * reason for SRV_GATE_BAD. Pure; any thread. */
srv_gate_verdict srv_gate_check(const char *buf, size_t n, unsigned *status_out,
                                size_t *head_len_out, char *msg, size_t msg_cap);

/* Checks the chunk-size lines of a chunked body whose first n bytes are at
 * buf, as far as they have arrived (RFC 9112 7.1): SRV_GATE_BAD with a
 * static reason in msg when one is not hexadecimal digits followed by an
 * extension or the line end, or its chunk does not end in a line end; OK
 * otherwise (what has not arrived is libmicrohttpd's to check). Pure. */
srv_gate_verdict srv_gate_check_chunks(const char *buf, size_t n, char *msg, size_t msg_cap);

#endif /* SRV_GATE_H */
