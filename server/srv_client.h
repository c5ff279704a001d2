/* SPDX-License-Identifier: Apache-2.0
 * server: the HTTP client over libcurl (the only server module that uses
 * libcurl): the requests of `shardplan client` (cmd/cmd_client.c) and the
 * benchmark webhooks (srv_bench.c). Thread contract: srv_client_global_init
 * and srv_client_global_fini from the main thread, around the requests of a
 * command-line client; requests from any thread (libcurl >= 7.84
 * initializes itself safely). */
#ifndef SRV_CLIENT_H
#define SRV_CLIENT_H

#include "cm.h"

#include <stddef.h>

/* libcurl's global set-up and tear-down (curl_global_init/cleanup) for a
 * process that sends requests. Errors: CM_EIO. */
cm_status srv_client_global_init(cm_error *err);
void srv_client_global_fini(void);

/* One request of the API client. All strings are borrowed for the call. */
typedef struct srv_client_req {
    const char *method; /* "GET", "POST", "PUT", "DELETE", "HEAD" */
    const char *url;    /* the whole URL */
    const char *token;  /* bearer token, or NULL */
    const char *ctype;  /* Content-Type of the body, or NULL */
    const char *body;   /* NULL: no body */
    size_t body_len;    /* bytes of body */
} srv_client_req;

/* Sends rq once (10 s to connect, 300 s in all) and appends the response
 * body to body_out (an initialised cm_buf the caller owns and finis, also
 * on failure); *status_out is the HTTP status (0 when none arrived). Errors:
 * CM_ENOMEM when libcurl cannot make a handle; CM_EIO with libcurl's message
 * when the transfer fails (a body_out that runs out of memory ends it). */
cm_status srv_client_request(const srv_client_req *rq, long *status_out, cm_buf *body_out,
                             cm_error *err);

/* POSTs body (body_len bytes of JSON) to url once, within timeout_s
 * seconds, without following redirects; *status_out is the HTTP status (0
 * when none arrived). The benchmark webhook (srv_bench.c). Errors: CM_EIO
 * with libcurl's message. Thread safety: any thread (libcurl >= 7.84
 * initializes itself safely). */
cm_status srv_client_post_json(const char *url, const char *body, size_t body_len,
                               double timeout_s, long *status_out, cm_error *err);

#endif /* SRV_CLIENT_H */
