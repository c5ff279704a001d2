/* SPDX-License-Identifier: Apache-2.0
 * server: the accept gate (srv_gate.h). One thread accepts, peeks at each
 * new connection's first request head (MSG_PEEK: the bytes stay for
 * libmicrohttpd), checks it and hands the connection on, or answers the
 * documented JSON error with Connection: close, shuts its sending side and
 * drains what the client still sends for a short while (a lingering close,
 * RFC 9112 9.6, so the answer is not lost to a reset). Every connection is
 * held for at most its head deadline (then 408) plus the linger time, and
 * counted in total and per client address until it closes, here or after
 * the hand-off. Memory: one record per held connection, bounded by
 * max_connections; one peek buffer for the thread. */
#define _GNU_SOURCE /* accept4, SOCK_NONBLOCK */
#include "srv_gate.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define LINGER_S         1.0     /* drain a refused connection at most this long */
#define LINGER_MAX_BYTES 1048576 /* ... and at most this many bytes */
#define ACCEPT_BATCH     64      /* connections accepted per wake-up */
#define EVENT_BATCH      64

typedef struct held {
    int fd;
    struct sockaddr_storage sa;
    socklen_t sa_len;
    double t0;      /* accepted, cm_now() */
    bool lingering; /* answered; draining until EOF */
    double until;   /* lingering: close at this time */
    size_t drained; /* lingering: bytes read */
    struct held *prev, *next;
} held;

typedef struct ip_count {
    unsigned char key[17]; /* family byte, then 4 or 16 address bytes */
    unsigned n;
} ip_count;

struct srv_gate {
    srv_gate_opts o;
    int ep, wake;
    pthread_t thread;
    bool stopped;        /* srv_gate_stop has run */
    int listen_marker;   /* epoll tag of the listen socket */
    double paused_until; /* accept paused (out of descriptors) until then; 0: not paused */
    held *list;
    unsigned n_held;
    pthread_mutex_t mu; /* guards the counts */
    unsigned n_open;
    ip_count *ips; /* max_connections slots; n == 0 is free */
    char buf[SRV_GATE_HEAD_MAX + 1];
};

/* ---- the head check -------------------------------------------------------------------- */

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The line starting at p (n bytes left): its length without the line end
 * in *len and with it in *adv; false when no line end has arrived. */
static bool line_at(const char *p, size_t n, size_t *len, size_t *adv)
{
    const char *nl = memchr(p, '\n', n);
    if (nl == NULL) {
        return false;
    }
    *len = (size_t)(nl - p);
    *adv = *len + 1;
    if (*len > 0 && p[*len - 1] == '\r') {
        (*len)--;
    }
    return true;
}

static srv_gate_verdict bad(unsigned status, unsigned *status_out, char *msg, size_t cap,
                            const char *text)
{
    *status_out = status;
    snprintf(msg, cap, "%s", text);
    return SRV_GATE_BAD;
}

/* Whether the comma-separated list v (len bytes) ends in the coding
 * "chunked", and whether it names any other coding. */
static void te_scan(const char *v, size_t len, bool *last_chunked, bool *other)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) {
            i++;
        }
        size_t s = i;
        while (i < len && v[i] != ',') {
            i++;
        }
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) {
            e--;
        }
        if (e == s) {
            continue;
        }
        bool ch = e - s == 7 && strncasecmp(v + s, "chunked", 7) == 0;
        *last_chunked = ch;
        *other = *other || !ch;
    }
}

/* The request line (len bytes at p); SRV_GATE_OK or why not. *v11 tells
 * HTTP/1.1 from HTTP/1.0. */
static srv_gate_verdict check_line(const char *p, size_t len, bool complete, bool *v11,
                                   unsigned *st, char *msg, size_t cap)
{
    size_t i = 0;
    while (i < len && is_tchar((unsigned char)p[i])) {
        i++;
    }
    if (i == len && !complete) {
        return SRV_GATE_MORE;
    }
    if (i == 0 || i == len || p[i] != ' ') {
        return bad(400, st, msg, cap,
                   "the request line is not HTTP: no method followed by a space");
    }
    size_t t = ++i;
    while (i < len && (unsigned char)p[i] > 0x20 && (unsigned char)p[i] < 0x7f) {
        i++;
    }
    if (i == len && !complete) {
        return SRV_GATE_MORE;
    }
    if (i == t || i == len || p[i] != ' ') {
        return bad(400, st, msg, cap,
                   "the request target must be visible ASCII followed by a space and the version");
    }
    i++;
    const char *v = p + i;
    size_t vl = len - i;
    if (!complete) {
        return vl > 8 ? bad(400, st, msg, cap, "the request line does not end after its version")
                      : SRV_GATE_MORE;
    }
    if (vl != 8 || strncmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
        v[7] < '0' || v[7] > '9') {
        return bad(400, st, msg, cap, "the request line does not end in HTTP/DIGIT.DIGIT");
    }
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1')) {
        return bad(505, st, msg, cap, "only HTTP/1.0 and HTTP/1.1 are supported");
    }
    *v11 = v[7] == '1';
    return SRV_GATE_OK;
}

srv_gate_verdict srv_gate_check(const char *buf, size_t n, unsigned *st, size_t *head_len_out,
                                char *msg, size_t cap)
{
    size_t at = 0, len = 0, adv = 0;
    /* at most a few empty lines before the request line (RFC 9112 2.2) */
    for (int k = 0; k < 4 && at < n && (buf[at] == '\r' || buf[at] == '\n'); k++) {
        if (!line_at(buf + at, n - at, &len, &adv)) {
            return n >= SRV_GATE_HEAD_MAX ? bad(400, st, msg, cap, "a bare CR before the request")
                                          : SRV_GATE_MORE;
        }
        if (len != 0) {
            return bad(400, st, msg, cap, "a bare CR before the request");
        }
        at += adv;
    }
    bool v11 = false;
    bool complete = line_at(buf + at, n - at, &len, &adv);
    size_t line_len = complete ? len : n - at;
    if (line_len > SRV_GATE_LINE_MAX) {
        return bad(414, st, msg, cap, "the request line is longer than 8192 bytes");
    }
    if (memchr(buf + at, '\r', line_len) != NULL) {
        return bad(400, st, msg, cap, "a bare CR in the request line");
    }
    srv_gate_verdict lv = check_line(buf + at, line_len, complete, &v11, st, msg, cap);
    if (lv != SRV_GATE_OK) {
        return lv;
    }
    at += adv;
    unsigned n_fields = 0, n_host = 0, n_cl = 0;
    const char *cl = NULL;
    size_t cl_len = 0;
    bool te = false, te_chunked = false, te_other = false;
    for (;;) {
        if (!line_at(buf + at, n - at, &len, &adv)) {
            return n >= SRV_GATE_HEAD_MAX
                       ? bad(431, st, msg, cap, "the request head is longer than 16384 bytes")
                       : SRV_GATE_MORE;
        }
        if (at + adv > SRV_GATE_HEAD_MAX) {
            return bad(431, st, msg, cap, "the request head is longer than 16384 bytes");
        }
        const char *p = buf + at;
        at += adv;
        if (len == 0) {
            break;
        }
        if (++n_fields > SRV_GATE_FIELDS_MAX) {
            return bad(431, st, msg, cap, "the request has more than 100 header fields");
        }
        if (p[0] == ' ' || p[0] == '\t') {
            return bad(400, st, msg, cap,
                       "a header line starts with white space (obsolete folding)");
        }
        size_t i = 0;
        while (i < len && is_tchar((unsigned char)p[i])) {
            i++;
        }
        if (i == 0 || i == len || p[i] != ':') {
            return bad(400, st, msg, cap, "a header line is not a field name, ':' and a value");
        }
        size_t name_len = i++;
        while (i < len && (p[i] == ' ' || p[i] == '\t')) {
            i++;
        }
        const char *v = p + i;
        size_t vl = len - i;
        for (size_t k = 0; k < vl; k++) {
            unsigned char c = (unsigned char)v[k];
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                return bad(400, st, msg, cap, "a header value holds a control character");
            }
        }
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) {
            vl--;
        }
        if (name_len == 4 && strncasecmp(p, "Host", 4) == 0) {
            n_host++;
        } else if (name_len == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
            if (vl == 0 || vl > 18 || strspn(v, "0123456789") < vl) {
                return bad(400, st, msg, cap, "Content-Length is not a number of 1 to 18 digits");
            }
            if (n_cl > 0 && (vl != cl_len || strncmp(v, cl, vl) != 0)) {
                return bad(400, st, msg, cap,
                           "the request has Content-Length headers with different values");
            }
            cl = v;
            cl_len = vl;
            n_cl++;
        } else if (name_len == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) {
            te = true;
            te_scan(v, vl, &te_chunked, &te_other);
        }
    }
    *head_len_out = at;
    if (n_host > 1) {
        return bad(400, st, msg, cap, "the request has more than one Host header");
    }
    if (v11 && n_host == 0) {
        return bad(400, st, msg, cap, "an HTTP/1.1 request must have a Host header");
    }
    if (te && n_cl > 0) {
        return bad(400, st, msg, cap, "the request has both Content-Length and Transfer-Encoding");
    }
    if (te && !v11) {
        return bad(400, st, msg, cap, "Transfer-Encoding in an HTTP/1.0 request");
    }
    if (te && !te_chunked) {
        return bad(400, st, msg, cap, "Transfer-Encoding does not end in chunked");
    }
    if (te && te_other) {
        return bad(501, st, msg, cap, "the only transfer coding supported is chunked");
    }
    return SRV_GATE_OK;
}

srv_gate_verdict srv_gate_check_chunks(const char *buf, size_t n, char *msg, size_t cap)
{
    unsigned st = 0;
    size_t at = 0;
    while (at < n) {
        size_t len = 0, adv = 0;
        size_t d = 0;
        while (at + d < n && strchr("0123456789abcdefABCDEF", buf[at + d]) != NULL &&
               buf[at + d] != '\0') {
            d++;
        }
        if (at + d == n) {
            return SRV_GATE_OK; /* the size line goes on past what has arrived */
        }
        char c = buf[at + d];
        if (d == 0 || d > 16 || (c != ';' && c != ' ' && c != '\t' && c != '\r' && c != '\n')) {
            return bad(400, &st, msg, cap, "a chunk size is not hexadecimal digits");
        }
        if (!line_at(buf + at, n - at, &len, &adv)) {
            return SRV_GATE_OK;
        }
        unsigned long long size = 0;
        for (size_t k = 0; k < d; k++) {
            char h = buf[at + k];
            unsigned v = h <= '9' ? (unsigned)(h - '0') : (unsigned)((h | 0x20) - 'a' + 10);
            size = size * 16 + v;
        }
        at += adv;
        if (size == 0) {
            return SRV_GATE_OK; /* the last chunk; trailers are not checked */
        }
        if (size >= n - at) {
            return SRV_GATE_OK; /* the chunk's data runs past what has arrived */
        }
        at += (size_t)size;
        if (buf[at] == '\n') {
            at++;
        } else if (buf[at] == '\r') {
            if (at + 1 < n && buf[at + 1] != '\n') {
                return bad(400, &st, msg, cap, "a chunk's data does not end in CRLF");
            }
            at += 2;
        } else {
            return bad(400, &st, msg, cap, "a chunk's data does not end in CRLF");
        }
    }
    return SRV_GATE_OK;
}

/* ---- counts ---------------------------------------------------------------------------- */

static void addr_key(const struct sockaddr *sa, unsigned char key[17])
{
    memset(key, 0, 17);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)(const void *)sa;
        key[0] = 4;
        memcpy(key + 1, &in4->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        key[0] = 6;
        memcpy(key + 1, &in6->sin6_addr, 16);
    }
}

/* Counts a new connection from sa; false (nothing counted) past a limit. */
static bool count_open(srv_gate *g, const struct sockaddr *sa)
{
    unsigned char key[17];
    addr_key(sa, key);
    bool ok = false;
    pthread_mutex_lock(&g->mu);
    if (g->n_open < g->o.max_connections) {
        ip_count *free_slot = NULL, *mine = NULL;
        for (unsigned i = 0; i < g->o.max_connections && mine == NULL; i++) {
            ip_count *c = &g->ips[i];
            if (c->n == 0) {
                free_slot = free_slot != NULL ? free_slot : c;
            } else if (memcmp(c->key, key, 17) == 0) {
                mine = c;
            }
        }
        if (mine == NULL && free_slot != NULL) {
            mine = free_slot;
            memcpy(mine->key, key, 17);
        }
        if (mine != NULL && (g->o.max_per_ip == 0 || mine->n < g->o.max_per_ip)) {
            mine->n++;
            g->n_open++;
            ok = true;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}

void srv_gate_closed(srv_gate *g, const struct sockaddr *sa)
{
    unsigned char key[17];
    addr_key(sa, key);
    pthread_mutex_lock(&g->mu);
    for (unsigned i = 0; i < g->o.max_connections; i++) {
        ip_count *c = &g->ips[i];
        if (c->n > 0 && memcmp(c->key, key, 17) == 0) {
            c->n--;
            g->n_open--;
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
}

/* ---- the thread ------------------------------------------------------------------------ */

static const char *reason(unsigned status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 408:
        return "Request Timeout";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

/* The method and target of the bytes at buf (n), NUL-free copies for the
 * log, at most cap - 1 bytes each. */
static void line_parts(const char *buf, size_t n, char *method, size_t mcap, char *target,
                       size_t cap)
{
    size_t i = 0, k = 0;
    while (i < n && buf[i] != ' ' && buf[i] != '\r' && buf[i] != '\n' && k + 1 < mcap) {
        method[k++] = buf[i] != '\0' ? buf[i] : '?';
        i++;
    }
    method[k] = '\0';
    while (i < n && buf[i] != ' ' && buf[i] != '\r' && buf[i] != '\n') {
        i++;
    }
    i += i < n && buf[i] == ' ' ? 1 : 0;
    k = 0;
    while (i < n && buf[i] != ' ' && buf[i] != '\r' && buf[i] != '\n' && k + 1 < cap) {
        target[k++] = buf[i] != '\0' ? buf[i] : '?';
        i++;
    }
    target[k] = '\0';
}

size_t srv_gate_answer_format(unsigned status, const char *hdrs, const char *body, size_t bl,
                              char *out, size_t cap)
{
    int hl = snprintf(out, cap,
                      "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "%s%sConnection: close\r\n\r\n",
                      status, reason(status), bl, status == 503 ? "Retry-After: 1\r\n" : "", hdrs);
    if (hl <= 0 || (size_t)hl + bl > cap) {
        return 0;
    }
    memcpy(out + hl, body, bl);
    return (size_t)hl + bl;
}

void srv_gate_find_origin(const char *buf, size_t n, char *out, size_t cap)
{
    static const char name[] = "origin:";
    const size_t nl = sizeof name - 1;
    out[0] = '\0';
    const char *end = buf + n;
    const char *p = memchr(buf, '\n', n); /* past the request line */
    while (p != NULL && p + 1 < end) {
        const char *line = p + 1;
        p = memchr(line, '\n', (size_t)(end - line));
        if (p == NULL) {
            return; /* an incomplete line */
        }
        size_t len = (size_t)(p - line);
        if (len > 0 && line[len - 1] == '\r') {
            len--;
        }
        if (len == 0) {
            return; /* the end of the head */
        }
        if (len <= nl || strncasecmp(line, name, nl) != 0) {
            continue;
        }
        const char *v = line + nl, *ve = line + len;
        while (v < ve && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) {
            ve--;
        }
        size_t vl = (size_t)(ve - v);
        if (vl == 0 || vl >= cap) {
            return;
        }
        for (size_t i = 0; i < vl; i++) {
            if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f) {
                return;
            }
        }
        memcpy(out, v, vl);
        out[vl] = '\0';
        return;
    }
}

/* Writes the error answer on fd (non-blocking; a fresh connection's send
 * buffer takes it whole) and shuts the sending side. */
static void answer(srv_gate *g, int fd, const struct sockaddr *sa, unsigned status,
                   const char *message, const char *head, size_t head_n, double t0)
{
    char method[64], target[256], origin[256], body[1024], hdrs[512], out[2048];
    line_parts(head, head_n, method, sizeof method, target, sizeof target);
    srv_gate_find_origin(head, head_n, origin, sizeof origin);
    srv_gate_refusal x = {status, message, sa, method, target, origin, cm_now() - t0};
    hdrs[0] = '\0';
    size_t bl = g->o.refuse(g->o.cls, &x, body, sizeof body, hdrs, sizeof hdrs);
    size_t n = srv_gate_answer_format(status, hdrs, body, bl, out, sizeof out);
    if (n > 0) {
        ssize_t w = send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w; /* a client that does not read loses its answer */
    }
    shutdown(fd, SHUT_WR);
}

static void forget(srv_gate *g, held *c, bool close_fd)
{
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        g->list = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    g->n_held--;
    if (close_fd) {
        close(c->fd);
        srv_gate_closed(g, (const struct sockaddr *)&c->sa);
    }
    cm_free(c);
}

static void start_linger(srv_gate *g, held *c, unsigned status, const char *message, size_t n)
{
    answer(g, c->fd, (const struct sockaddr *)&c->sa, status, message, g->buf, n, c->t0);
    c->lingering = true;
    c->until = cm_now() + LINGER_S;
}

/* Reads what a refused client still sends; closes at its EOF or limit. */
static void drain(srv_gate *g, held *c)
{
    for (int k = 0; k < 64; k++) {
        ssize_t r = recv(c->fd, g->buf, sizeof g->buf, MSG_DONTWAIT);
        if (r > 0) {
            c->drained += (size_t)r;
            if (c->drained < LINGER_MAX_BYTES) {
                continue;
            }
        } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return;
        }
        forget(g, c, true);
        return;
    }
}

/* Whether the valid head (len bytes at buf) has a Transfer-Encoding header
 * (which the check has made sure ends in chunked). */
static bool has_chunked(const char *buf, size_t len)
{
    static const char name[] = "\ntransfer-encoding:";
    size_t nl = sizeof name - 1;
    for (size_t i = 0; i + nl <= len; i++) {
        if (buf[i] == '\n' && strncasecmp(buf + i, name, nl) == 0) {
            return true;
        }
    }
    return false;
}

/* Looks at a held connection's input: hands it on, refuses it or waits. */
static void look(srv_gate *g, held *c, bool hup)
{
    if (c->lingering) {
        drain(g, c);
        return;
    }
    ssize_t r = recv(c->fd, g->buf, SRV_GATE_HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        forget(g, c, true); /* gone before its head was complete */
        return;
    }
    if (r < 0) {
        return;
    }
    size_t n = (size_t)r;
    unsigned st = 0;
    size_t head_len = 0;
    char msg[160];
    srv_gate_verdict v = srv_gate_check(g->buf, n, &st, &head_len, msg, sizeof msg);
    if (v == SRV_GATE_MORE && hup) {
        v = SRV_GATE_BAD;
        st = 400;
        snprintf(msg, sizeof msg, "the connection was half-closed before the request head ended");
    }
    if (v == SRV_GATE_BAD) {
        start_linger(g, c, st, msg, n);
        return;
    }
    if (v == SRV_GATE_OK && n > head_len && has_chunked(g->buf, head_len)) {
        v = srv_gate_check_chunks(g->buf + head_len, n - head_len, msg, sizeof msg);
        if (v == SRV_GATE_BAD) {
            start_linger(g, c, 400, msg, n);
            return;
        }
    }
    if (v == SRV_GATE_OK) {
        int fd = c->fd;
        struct sockaddr_storage sa = c->sa;
        socklen_t len = c->sa_len;
        forget(g, c, false);
        g->o.hand(g->o.cls, fd, (const struct sockaddr *)&sa, len);
    }
}

/* Drains every lingering connection now, so those whose clients have
 * closed free their slots: their close events may come after the next
 * connection's in one epoll batch. Bounded by the held connections. */
static void reap_lingering(srv_gate *g)
{
    held *next = NULL;
    for (held *c = g->list; c != NULL; c = next) {
        next = c->next;
        if (c->lingering) {
            drain(g, c);
        }
    }
}

static void accept_some(srv_gate *g)
{
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd =
            accept4(g->o.listen_fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the backlog stays readable: stop watching it for a moment
                 * rather than spin until descriptors are free */
                epoll_ctl(g->ep, EPOLL_CTL_DEL, g->o.listen_fd, NULL);
                g->paused_until = cm_now() + 0.1;
            }
            return; /* EAGAIN, or an error the next wake-up retries */
        }
        double now = cm_now();
        bool counted = count_open(g, (const struct sockaddr *)&sa);
        if (!counted && g->n_held > 0) {
            reap_lingering(g);
            counted = count_open(g, (const struct sockaddr *)&sa);
        }
        if (!counted) {
            char junk[4096];
            ssize_t r = recv(fd, junk, sizeof junk, MSG_DONTWAIT);
            /* what came already: a close with unread bytes would reset; its
             * Origin, if the head is there, gets the CORS headers */
            answer(g, fd, (const struct sockaddr *)&sa, 503, "too many connections", junk,
                   r > 0 ? (size_t)r : 0, now);
            close(fd);
            continue;
        }
        held *c = cm_calloc(1, sizeof *c);
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
        ev.data.ptr = c;
        if (c == NULL) {
            close(fd);
            srv_gate_closed(g, (const struct sockaddr *)&sa);
            continue;
        }
        c->fd = fd;
        c->sa = sa;
        c->sa_len = len;
        c->t0 = now;
        c->next = g->list;
        if (g->list != NULL) {
            g->list->prev = c;
        }
        g->list = c;
        g->n_held++;
        if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            forget(g, c, true);
            continue;
        }
        look(g, c, false); /* the head may be there already */
    }
}

/* Refuses heads past their deadline and closes lingering connections past
 * theirs. */
static void sweep(srv_gate *g, double now)
{
    if (g->paused_until > 0 && now >= g->paused_until) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.ptr = &g->listen_marker;
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->o.listen_fd, &ev);
        g->paused_until = 0;
    }
    held *next = NULL;
    for (held *c = g->list; c != NULL; c = next) {
        next = c->next;
        if (c->lingering) {
            if (now >= c->until) {
                forget(g, c, true);
            }
        } else if (now - c->t0 > g->o.head_timeout_s) {
            ssize_t r = recv(c->fd, g->buf, SRV_GATE_HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);
            if (r > 0) {
                start_linger(g, c, 408, "the request head did not arrive in time", (size_t)r);
            } else {
                forget(g, c, true); /* nothing sent: closed without an answer */
            }
        }
    }
}

static void *gate_main(void *arg)
{
    srv_gate *g = arg;
    int wake_marker = 0;
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.ptr = &g->listen_marker;
    epoll_ctl(g->ep, EPOLL_CTL_ADD, g->o.listen_fd, &ev);
    ev.data.ptr = &wake_marker;
    epoll_ctl(g->ep, EPOLL_CTL_ADD, g->wake, &ev);
    double next_sweep = cm_now() + 0.1;
    for (;;) {
        struct epoll_event evs[EVENT_BATCH];
        int n = epoll_wait(g->ep, evs, EVENT_BATCH, 100);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &wake_marker) {
                return NULL;
            }
            if (p == &g->listen_marker) {
                accept_some(g);
                continue;
            }
            look(g, p, (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
        }
        double now = cm_now();
        if (now >= next_sweep) {
            sweep(g, now);
            next_sweep = now + 0.1;
        }
    }
}

cm_status srv_gate_start(const srv_gate_opts *o, srv_gate **out, cm_error *err)
{
    *out = NULL;
    srv_gate *g = cm_calloc(1, sizeof *g);
    if (g == NULL) {
        return cm_error_oom(err);
    }
    g->o = *o;
    g->o.max_connections = o->max_connections > 0 ? o->max_connections : 1;
    g->ips = cm_calloc(g->o.max_connections, sizeof *g->ips);
    if (g->ips == NULL) {
        cm_free(g);
        return cm_error_oom(err);
    }
    pthread_mutex_init(&g->mu, NULL);
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    *out = g; /* before the thread: its hand-offs may report closes at once */
    if (g->ep < 0 || g->wake < 0 || pthread_create(&g->thread, NULL, gate_main, g) != 0) {
        int e = errno;
        *out = NULL;
        if (g->ep >= 0) {
            close(g->ep);
        }
        if (g->wake >= 0) {
            close(g->wake);
        }
        pthread_mutex_destroy(&g->mu);
        cm_free(g->ips);
        cm_free(g);
        return cm_error_set(err, CM_EIO, NULL, "cannot start the accept gate: %s", strerror(e));
    }
    return CM_OK;
}

void srv_gate_stop(srv_gate *g)
{
    if (g == NULL || g->stopped) {
        return;
    }
    g->stopped = true;
    uint64_t one = 1;
    ssize_t w = write(g->wake, &one, sizeof one);
    (void)w;
    pthread_join(g->thread, NULL);
    while (g->list != NULL) {
        forget(g, g->list, true);
    }
}

void srv_gate_free(srv_gate *g)
{
    if (g == NULL) {
        return;
    }
    srv_gate_stop(g);
    close(g->ep);
    close(g->wake);
    pthread_mutex_destroy(&g->mu);
    cm_free(g->ips);
    cm_free(g);
}
