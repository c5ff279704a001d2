/* SPDX-License-Identifier: Apache-2.0
 * Test helper (not a test): the real server in-process on 127.0.0.1, port 0,
 * with a temporary database, and HTTP requests to it through libcurl. The
 * integration tests of server/ share it (test_srv_api.c, test_srv_bench.c,
 * test_srv_plan_input.c). Failures are cmocka assertions. */
#ifndef TU_HTTP_H
#define TU_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cm.h"
#include "srv_app.h"

typedef struct tu_server {
    char dir[256]; /* the temporary directory */
    char db[300];  /* its database file */
    srv_app *app;
    char base[64]; /* http://127.0.0.1:PORT */
    int64_t plan_id; /* for the tests' own use */
} tu_server;

/* Makes the temporary directory ($TMPDIR/PREFIX_XXXXXX); 0 or -1. */
int tu_server_init(tu_server *s, const char *prefix);
/* The tests' configuration: loopback, port 0, s's database, no log file,
 * 2 threads, 2 plan workers, 1 MiB bodies, 15 s requests, 5 s drain. */
void tu_config_default(const tu_server *s, srv_config *c);
/* The same with this very binary as the benchmark worker (its main must
 * hand `exec-worker` to cmd_worker), no memory limit (ASan reserves terabytes
 * of address space) and the given time limit and test faults. */
void tu_config_worker(const tu_server *s, srv_config *c, double time_limit_s, bool faults);
void tu_server_start(tu_server *s, const srv_config *c);
void tu_server_stop(tu_server *s);
/* Stops the server and removes the database and the directory. */
void tu_server_fini(tu_server *s);

typedef struct tu_resp {
    long status;
    cm_buf body;
    char location[128];
    char allow[128];
    char www_auth[128];
    char etag[96];
    char cache_control[128];
    char content_type[96];
    char cors_origin[128]; /* Access-Control-Allow-Origin */
    json_t *json; /* parsed body or NULL */
} tu_resp;

void tu_http_ex(const tu_server *s, const char *method, const char *path, const char *ctype,
                const char *body, size_t len, const char *token, const char *extra_hdr,
                tu_resp *out);
/* body NUL-terminated or NULL. */
void tu_http(const tu_server *s, const char *method, const char *path, const char *ctype,
             const char *body, tu_resp *out);
void tu_resp_fini(tu_resp *r);
/* A libcurl write callback appending to the cm_buf ud. */
size_t tu_on_body(char *p, size_t s, size_t n, void *ud);
/* For a libcurl header callback: when the header line p (len bytes) is
 * name (e.g. "Location: ", matched case-insensitively) and a value, copies
 * the value without its line end into dst (cap bytes) and returns true. */
bool tu_header_copy(const char *p, size_t len, const char *name, char *dst, size_t cap);

json_int_t tu_jint(const json_t *j, const char *key);
const char *tu_jstr(const json_t *j, const char *key);
/* Asserts an error reply: status, code and (when not NULL) path. */
void tu_expect_error(const tu_resp *r, long status, const char *code, const char *path);
/* The whole file (cm_free it). */
char *tu_read_file(const char *path, size_t *len);

#endif /* TU_HTTP_H */
