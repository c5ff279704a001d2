/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan client`, the command-line client of the HTTP API. Each
 * command is one request through server/srv_client.h; the answer is the
 * server's JSON (or a table with --table), errors are the server's
 * {"error":{...}} message, or libcurl's when nothing came back. */
#include "cmd.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cm.h"
#include "cm_json.h"
#include "srv_client.h"
#include "srv_json.h"

typedef struct client {
    const char *server; /* base URL without trailing slash */
    const char *token;  /* or NULL */
    bool table;
    FILE *out, *errs;
} client;

static void usage(FILE *f)
{
    fputs("usage: shardplan client --server URL [--token T] [--table] COMMAND ...\n"
          "  submit FILE|- [--name N]                 store a graph (JSON or MLIR)\n"
          "  plan FILE|- [--mesh NAME] [--pass P] [--name N]\n"
          "  plan --graph-id ID [--mesh NAME] [--pass P]\n"
          "                                           plan a graph (same request: stored plan)\n"
          "  get plan|graph|run|mesh|rule|profile ID|NAME\n"
          "  list plans|graphs|runs|meshes|rules|profiles|tokens [--limit N] [--after ID]\n"
          "  put mesh|rule|profile NAME FILE|-        store a named document\n"
          "  delete plan|graph|run|mesh|rule|profile|token ID|NAME\n"
          "  compare ID ID [ID ID] [--profile NAME]   plans side by side\n"
          "  bench PLAN_ID [--spec JSON] [--webhook URL] [--wait [--timeout S]]\n"
          "                                           queue a benchmark run; --wait polls it,\n"
          "                                           progress on stderr, and prints the result\n"
          "  lint|collectives|cost|memory|suggest PLAN_ID [--profile P] [--query K=V]...\n"
          "                                           the plan advisor (GET /v1/plans/ID/...)\n"
          "  whatif PLAN_ID FILE|-                    POST /v1/plans/ID/whatif with the edits\n"
          "  sweep [--query K=V]...                   GET /v1/sweep?K=V&...\n"
          "  sweep PLAN_ID [--query K=V]...           GET /v1/plans/PLAN_ID/sweep?K=V&...\n"
          "  trace RUN_ID                             a benchmark's Chrome trace\n"
          "  request METHOD PATH [FILE|-] [--type T]  any route, e.g. request GET /v1/openapi.json\n"
          "  health                                   /healthz and /readyz\n"
          "URL and token also come from SHARDPLAN_SERVER and SHARDPLAN_TOKEN.\n"
          "One-line pipeline: shardplan example mlp | shardplan client --server URL plan -\n",
          f);
}

/* Sends one request into resp (initialised by the caller); 0 with *status
 * set when an answer came (any status), 1 after printing why none did. */
static int fetch(const client *c, const char *method, const char *path, const char *ctype,
                 const char *body, size_t body_len, long *status, cm_buf *resp)
{
    char url[4096];
    snprintf(url, sizeof url, "%s%s", c->server, path);
    srv_client_req rq = {method, url, c->token, ctype, body, body_len};
    *status = 0;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = srv_client_request(&rq, status, resp, &e);
    if (st == CM_ENOMEM) {
        fprintf(c->errs, "shardplan client: %s\n", e.msg); /* no easy handle */
        return 1;
    }
    if (st != CM_OK) {
        fprintf(c->errs, "shardplan client: %s %s: %s\n", method, url, e.msg);
        return 1;
    }
    return 0;
}

/* Prints an answer: the server's error message on stderr (exit 1), else the
 * body (or a table with --table). */
static int print_answer(const client *c, long status, const cm_buf *r)
{
    const cm_buf resp = *r;
    int ret = 0;
    if (status >= 400) {
        char msg[600];
        if (srv_json_error_text(resp.data != NULL ? resp.data : "", resp.len, msg, sizeof msg)) {
            fprintf(c->errs, "shardplan client: HTTP %ld: %s\n", status, msg);
        } else {
            fprintf(c->errs, "shardplan client: HTTP %ld: %.*s\n", status, (int)resp.len,
                    resp.data != NULL ? resp.data : "");
        }
        ret = 1;
    } else if (resp.len > 0) {
        if (c->table) {
            srv_json_print_table(resp.data, resp.len, c->out);
        } else {
            fwrite(resp.data, 1, resp.len, c->out);
            if (resp.data[resp.len - 1] != '\n') {
                fputc('\n', c->out);
            }
        }
    } else {
        fprintf(c->out, "HTTP %ld\n", status);
    }
    return ret;
}

/* Sends one request; prints the answer. Returns an exit status. */
static int request(const client *c, const char *method, const char *path, const char *ctype,
                   const char *body, size_t body_len)
{
    cm_buf resp;
    cm_buf_init(&resp);
    long status = 0;
    int ret = fetch(c, method, path, ctype, body, body_len, &status, &resp) != 0
                  ? 1
                  : print_answer(c, status, &resp);
    cm_buf_fini(&resp);
    return ret;
}

/* URL-encodes s into a buffer of cap bytes. */
static void url_escape(const char *s, char *out, size_t cap)
{
    static const char hexd[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0' && n + 4 < cap; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hexd[*p >> 4];
            out[n++] = hexd[*p & 15];
        }
    }
    out[n] = '\0';
}

static bool looks_json(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
            return s[i] == '{';
        }
    }
    return false;
}

static const char *collection(const char *kind)
{
    static const char *const map[][2] = {
        {"plan", "plans"},     {"plans", "plans"},       {"graph", "graphs"},
        {"graphs", "graphs"},  {"run", "runs"},          {"runs", "runs"},
        {"mesh", "meshes"},    {"meshes", "meshes"},     {"rule", "rules"},
        {"rules", "rules"},    {"profile", "profiles"},  {"profiles", "profiles"},
        {"token", "tokens"},   {"tokens", "tokens"},     {"bench", "runs"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(kind, map[i][0]) == 0) {
            return map[i][1];
        }
    }
    return NULL;
}

static const char *opt_value(int argc, char **argv, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], name) == 0 && i + 1 < argc) {
            return argv[i + 1];
        }
        if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') {
            return argv[i] + n + 1;
        }
    }
    return NULL;
}

/* The first argument not an option or an option's value, after index from. */
static const char *positional(int argc, char **argv, int from, int nth)
{
    int k = 0;
    for (int i = from; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) == 0) {
            i += strchr(argv[i], '=') == NULL;
            continue;
        }
        if (k++ == nth) {
            return argv[i];
        }
    }
    return NULL;
}

/* Reads the input FILE ("-": stdin) into *data: 0; 1 after an error; 2 after
 * the usage when the command line named no file. */
static int read_input(const client *c, const char *file, char **data, size_t *len)
{
    if (file == NULL) {
        usage(c->errs);
        return 2;
    }
    cm_error e;
    cm_error_clear(&e);
    if (cm_file_read(file, data, len, &e) != CM_OK) {
        fprintf(c->errs, "shardplan client: %s: %s\n", file, e.msg);
        return 1;
    }
    return 0;
}

static int client_submit(const client *c, int argc, char **argv)
{
    const char *file = positional(argc, argv, 1, 0);
    char *data = NULL;
    size_t len = 0;
    int rc = read_input(c, file, &data, &len);
    if (rc != 0) {
        return rc;
    }
    char path[600] = "/v1/graphs";
    const char *name = opt_value(argc, argv, "--name");
    if (name != NULL) {
        char esc[500];
        url_escape(name, esc, sizeof esc);
        snprintf(path, sizeof path, "/v1/graphs?name=%s", esc);
    }
    rc = request(c, "POST", path, looks_json(data, len) ? "application/json" : "text/plain", data,
                 len);
    cm_free(data);
    return rc;
}

static int client_plan(const client *c, int argc, char **argv)
{
    const char *mesh = opt_value(argc, argv, "--mesh");
    const char *pass = opt_value(argc, argv, "--pass");
    const char *name = opt_value(argc, argv, "--name");
    const char *gid = opt_value(argc, argv, "--graph-id");
    cm_buf env;
    cm_buf_init(&env);
    int rc = 0;
    if (gid != NULL) {
        char *end = NULL;
        long long id = strtoll(gid, &end, 10);
        if (*end != '\0' || id <= 0) {
            fprintf(c->errs, "shardplan client: --graph-id takes a positive integer\n");
            return 2;
        }
        cm_buf_putc(&env, '{');
        cm_json_put_kv_i64(&env, "graph_id", id);
        if (mesh != NULL) {
            cm_json_put_kv_str(&env, "mesh", mesh);
        }
        if (pass != NULL) {
            cm_json_put_key(&env, "options");
            cm_buf_putc(&env, '{');
            cm_json_put_kv_str(&env, "pass", pass);
            cm_buf_putc(&env, '}');
        }
        cm_buf_putc(&env, '}');
    } else {
        const char *file = positional(argc, argv, 1, 0);
        char *data = NULL;
        size_t len = 0;
        int got = read_input(c, file, &data, &len);
        if (got != 0) {
            return got;
        }
        cm_error e;
        cm_error_clear(&e);
        if (srv_json_plan_envelope(data, len, !looks_json(data, len), mesh, pass, &env, &e) !=
            CM_OK) {
            fprintf(c->errs, "shardplan client: %s: %s\n", file, e.msg);
            cm_free(data);
            cm_buf_fini(&env);
            return 1;
        }
        cm_free(data);
    }
    char path[600] = "/v1/plans";
    if (name != NULL) {
        char esc[500];
        url_escape(name, esc, sizeof esc);
        snprintf(path, sizeof path, "/v1/plans?name=%s", esc);
    }
    rc = request(c, "POST", path, "application/json", env.data, env.len);
    cm_buf_fini(&env);
    return rc;
}

static int client_get_delete(const client *c, int argc, char **argv, const char *method)
{
    const char *kind = positional(argc, argv, 1, 0);
    const char *id = positional(argc, argv, 1, 1);
    const char *coll = kind != NULL ? collection(kind) : NULL;
    if (coll == NULL || id == NULL) {
        usage(c->errs);
        return 2;
    }
    char esc[500], path[700];
    url_escape(id, esc, sizeof esc);
    snprintf(path, sizeof path, "/v1/%s/%s", coll, esc);
    return request(c, method, path, NULL, NULL, 0);
}

static int client_list(const client *c, int argc, char **argv)
{
    const char *kind = positional(argc, argv, 1, 0);
    const char *coll = kind != NULL ? collection(kind) : NULL;
    if (coll == NULL) {
        usage(c->errs);
        return 2;
    }
    char path[300];
    const char *limit = opt_value(argc, argv, "--limit");
    const char *after = opt_value(argc, argv, "--after");
    snprintf(path, sizeof path, "/v1/%s?limit=%s&after=%s", coll, limit != NULL ? limit : "0",
             after != NULL ? after : "0");
    return request(c, "GET", path, NULL, NULL, 0);
}

static int client_put(const client *c, int argc, char **argv)
{
    const char *kind = positional(argc, argv, 1, 0);
    const char *name = positional(argc, argv, 1, 1);
    const char *file = positional(argc, argv, 1, 2);
    const char *coll = kind != NULL ? collection(kind) : NULL;
    if (coll == NULL || name == NULL || file == NULL) {
        usage(c->errs);
        return 2;
    }
    char *data = NULL;
    size_t len = 0;
    if (read_input(c, file, &data, &len) != 0) {
        return 1;
    }
    char esc[500], path[700];
    url_escape(name, esc, sizeof esc);
    snprintf(path, sizeof path, "/v1/%s/%s", coll, esc);
    int rc = request(c, "PUT", path, "application/json", data, len);
    cm_free(data);
    return rc;
}

static int client_compare(const client *c, int argc, char **argv)
{
    char path[600] = "/v1/compare?plans=";
    int n = 0;
    for (int k = 0; k < 4; k++) {
        const char *id = positional(argc, argv, 1, k);
        if (id == NULL) {
            break;
        }
        char esc[64];
        url_escape(id, esc, sizeof esc);
        size_t at = strlen(path);
        snprintf(path + at, sizeof path - at, "%s%s", n++ > 0 ? "," : "", esc);
    }
    if (n < 2) {
        usage(c->errs);
        return 2;
    }
    const char *profile = opt_value(argc, argv, "--profile");
    if (profile != NULL) {
        char esc[200];
        url_escape(profile, esc, sizeof esc);
        size_t at = strlen(path);
        snprintf(path + at, sizeof path - at, "&profile=%s", esc);
    }
    return request(c, "GET", path, NULL, NULL, 0);
}

/* The number after "KEY": in a run's JSON (its top-level members come
 * before spec and results), or def. */
static double run_num(const cm_buf *b, const char *key, double def)
{
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = b->data != NULL ? strstr(b->data, pat) : NULL;
    return p != NULL ? strtod(p + strlen(pat), NULL) : def;
}

/* Polls the run resp names (GET /v1/runs/ID, twice a second, at most limit
 * seconds), its status and progress on stderr as they change, then prints
 * the final run: 0 when it succeeded, 1 when it failed, was canceled or
 * did not end in time. */
static int wait_run(const client *c, cm_buf *resp, double limit)
{
    long long id = (long long)run_num(resp, "id", 0);
    if (id <= 0) {
        fprintf(c->errs, "shardplan client: the answer names no run\n");
        return 1;
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/runs/%lld", id);
    double t0 = cm_now();
    char last[64] = "";
    for (;;) {
        cm_arena a;
        cm_arena_init(&a, 256);
        const char *st = srv_json_get_string(resp->data != NULL ? resp->data : "", resp->len,
                                             "status", &a);
        char now[64];
        snprintf(now, sizeof now, "%s %.0f%%", st != NULL ? st : "?",
                 100 * run_num(resp, "progress", 0));
        bool final = st != NULL && (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
                                    strcmp(st, "canceled") == 0);
        bool ok = st != NULL && strcmp(st, "succeeded") == 0;
        cm_arena_fini(&a);
        if (strcmp(now, last) != 0) {
            fprintf(c->errs, "run %lld: %s\n", id, now);
            snprintf(last, sizeof last, "%s", now);
        }
        if (final) {
            int rc = print_answer(c, 200, resp);
            return ok ? rc : 1;
        }
        if (cm_now() - t0 > limit) {
            fprintf(c->errs, "shardplan client: run %lld did not end within %.0f s\n", id, limit);
            return 1;
        }
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
        cm_buf_reset(resp);
        long status = 0;
        if (fetch(c, "GET", path, NULL, NULL, 0, &status, resp) != 0) {
            return 1;
        }
        if (status >= 400) {
            return print_answer(c, status, resp);
        }
    }
}

static int client_bench(const client *c, int argc, char **argv)
{
    const char *plan = positional(argc, argv, 1, 0);
    char *end = NULL;
    long long id = plan != NULL ? strtoll(plan, &end, 10) : 0;
    if (plan == NULL || *end != '\0' || id <= 0) {
        usage(c->errs);
        return 2;
    }
    const char *spec = opt_value(argc, argv, "--spec");
    const char *hook = opt_value(argc, argv, "--webhook");
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    cm_json_put_kv_i64(&b, "plan_id", id);
    if (spec != NULL) {
        cm_json_put_key(&b, "spec");
        cm_buf_puts(&b, spec);
    }
    if (hook != NULL) {
        cm_json_put_kv_str(&b, "webhook_url", hook);
    }
    cm_buf_putc(&b, '}');
    bool wait = false;
    for (int i = 1; i < argc; i++) {
        wait = wait || strcmp(argv[i], "--wait") == 0;
    }
    if (!wait) {
        int rc = request(c, "POST", "/v1/runs", "application/json", b.data, b.len);
        cm_buf_fini(&b);
        return rc;
    }
    const char *tv = opt_value(argc, argv, "--timeout");
    double limit = tv != NULL ? strtod(tv, NULL) : 600;
    if (!(limit > 0)) {
        fprintf(c->errs, "shardplan client: --timeout takes seconds > 0\n");
        cm_buf_fini(&b);
        return 2;
    }
    cm_buf resp;
    cm_buf_init(&resp);
    long status = 0;
    int rc = fetch(c, "POST", "/v1/runs", "application/json", b.data, b.len, &status, &resp);
    cm_buf_fini(&b);
    if (rc == 0 && status >= 400) {
        rc = print_answer(c, status, &resp);
    }
    if (rc != 0) {
        cm_buf_fini(&resp);
        return rc;
    }
    rc = wait_run(c, &resp, limit);
    cm_buf_fini(&resp);
    return rc;
}

/* Appends every --query K=V of argv to path (cap bytes) as &K=V (the first
 * as ?K=V), V URL-encoded. False when one is not K=V or path is full. */
static bool add_queries(const client *c, int argc, char **argv, char *path, size_t cap)
{
    for (int i = 1; i < argc; i++) {
        const char *kv = NULL;
        if (strcmp(argv[i], "--query") == 0 && i + 1 < argc) {
            kv = argv[++i];
        } else if (strncmp(argv[i], "--query=", 8) == 0) {
            kv = argv[i] + 8;
        } else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
            continue; /* taken by the caller */
        } else {
            continue;
        }
        const char *eq = strchr(kv, '=');
        if (eq == NULL || eq == kv || (size_t)(eq - kv) > 64) {
            fprintf(c->errs, "shardplan client: --query takes KEY=VALUE, not '%s'\n", kv);
            return false;
        }
        char esc[1024];
        url_escape(eq + 1, esc, sizeof esc);
        size_t at = strlen(path);
        int w = snprintf(path + at, cap - at, "%c%.*s=%s", strchr(path, '?') ? '&' : '?',
                         (int)(eq - kv), kv, esc);
        if (w < 0 || (size_t)w >= cap - at) {
            fprintf(c->errs, "shardplan client: the query is too long\n");
            return false;
        }
    }
    return true;
}

/* A positive id argument, or 0. */
static long long id_arg(const char *s)
{
    char *end = NULL;
    long long id = s != NULL ? strtoll(s, &end, 10) : 0;
    return s != NULL && *end == '\0' && id > 0 ? id : 0;
}

/* lint|collectives|cost|memory|suggest PLAN_ID [--profile P] [--query K=V]... */
static int client_advise(const client *c, int argc, char **argv, const char *what)
{
    long long id = id_arg(positional(argc, argv, 1, 0));
    if (id == 0) {
        usage(c->errs);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "/v1/plans/%lld/%s", id, what);
    const char *profile = opt_value(argc, argv, "--profile");
    if (profile != NULL) {
        char esc[200];
        url_escape(profile, esc, sizeof esc);
        size_t at = strlen(path);
        snprintf(path + at, sizeof path - at, "?profile=%s", esc);
    }
    if (!add_queries(c, argc, argv, path, sizeof path)) {
        return 2;
    }
    return request(c, "GET", path, NULL, NULL, 0);
}

static int client_whatif(const client *c, int argc, char **argv)
{
    long long id = id_arg(positional(argc, argv, 1, 0));
    if (id == 0) {
        usage(c->errs);
        return 2;
    }
    char *data = NULL;
    size_t len = 0;
    int rc = read_input(c, positional(argc, argv, 1, 1), &data, &len);
    if (rc != 0) {
        return rc;
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/plans/%lld/whatif", id);
    rc = request(c, "POST", path, "application/json", data, len);
    cm_free(data);
    return rc;
}

/* sweep [PLAN_ID] [--query K=V]...: the template, or the plan's own model. */
static int client_sweep(const client *c, int argc, char **argv)
{
    char path[4096] = "/v1/sweep";
    const char *pos = positional(argc, argv, 1, 0);
    if (pos != NULL) {
        long long id = id_arg(pos);
        if (id == 0) {
            usage(c->errs);
            return 2;
        }
        snprintf(path, sizeof path, "/v1/plans/%lld/sweep", id);
    }
    if (!add_queries(c, argc, argv, path, sizeof path)) {
        return 2;
    }
    return request(c, "GET", path, NULL, NULL, 0);
}

static int client_trace(const client *c, int argc, char **argv)
{
    long long id = id_arg(positional(argc, argv, 1, 0));
    if (id == 0) {
        usage(c->errs);
        return 2;
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/benchmarks/%lld/trace", id);
    return request(c, "GET", path, NULL, NULL, 0);
}

/* request METHOD PATH [FILE|-] [--type T]: any route as it is. */
static int client_raw(const client *c, int argc, char **argv)
{
    const char *method = positional(argc, argv, 1, 0), *path = positional(argc, argv, 1, 1);
    const char *file = positional(argc, argv, 1, 2);
    if (method == NULL || path == NULL || path[0] != '/') {
        usage(c->errs);
        return 2;
    }
    char *data = NULL;
    size_t len = 0;
    if (file != NULL) {
        int rc = read_input(c, file, &data, &len);
        if (rc != 0) {
            return rc;
        }
    }
    const char *ctype = opt_value(argc, argv, "--type");
    if (ctype == NULL && data != NULL) {
        ctype = looks_json(data, len) ? "application/json" : "text/plain";
    }
    int rc = request(c, method, path, ctype, data, len);
    cm_free(data);
    return rc;
}

int cmd_client(int argc, char **argv, FILE *out, FILE *errs)
{
    client c = {getenv("SHARDPLAN_SERVER"), getenv("SHARDPLAN_TOKEN"), false, out, errs};
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--server") == 0 && i + 1 < argc) {
            c.server = argv[++i];
        } else if (strncmp(argv[i], "--server=", 9) == 0) {
            c.server = argv[i] + 9;
        } else if (strcmp(argv[i], "--token") == 0 && i + 1 < argc) {
            c.token = argv[++i];
        } else if (strncmp(argv[i], "--token=", 8) == 0) {
            c.token = argv[i] + 8;
        } else if (strcmp(argv[i], "--table") == 0) {
            c.table = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            c.table = false;
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(out);
            return 0;
        } else {
            fprintf(errs, "shardplan client: unknown option '%s'\n", argv[i]);
            usage(errs);
            return 2;
        }
    }
    if (i >= argc || c.server == NULL) {
        if (c.server == NULL) {
            fprintf(errs, "shardplan client: no server: give --server URL or SHARDPLAN_SERVER\n");
        }
        usage(errs);
        return 2;
    }
    char base[2048];
    snprintf(base, sizeof base, "%s", c.server);
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/') {
        base[--n] = '\0';
    }
    c.server = base;
    const char *cmd = argv[i];
    int sub_argc = argc - i;
    char **sub_argv = argv + i;
    /* the table flag may also follow the command */
    for (int k = 1; k < sub_argc; k++) {
        if (strcmp(sub_argv[k], "--table") == 0) {
            c.table = true;
        }
    }
    cm_error e;
    cm_error_clear(&e);
    if (srv_client_global_init(&e) != CM_OK) {
        fprintf(errs, "shardplan client: %s\n", e.msg);
        return 1;
    }
    int rc;
    if (strcmp(cmd, "submit") == 0) {
        rc = client_submit(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "plan") == 0) {
        rc = client_plan(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "get") == 0) {
        rc = client_get_delete(&c, sub_argc, sub_argv, "GET");
    } else if (strcmp(cmd, "delete") == 0) {
        rc = client_get_delete(&c, sub_argc, sub_argv, "DELETE");
    } else if (strcmp(cmd, "list") == 0) {
        rc = client_list(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "put") == 0) {
        rc = client_put(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "compare") == 0) {
        rc = client_compare(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "bench") == 0) {
        rc = client_bench(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "lint") == 0 || strcmp(cmd, "collectives") == 0 ||
               strcmp(cmd, "cost") == 0 || strcmp(cmd, "memory") == 0 ||
               strcmp(cmd, "suggest") == 0) {
        rc = client_advise(&c, sub_argc, sub_argv, cmd);
    } else if (strcmp(cmd, "whatif") == 0) {
        rc = client_whatif(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "sweep") == 0) {
        rc = client_sweep(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "trace") == 0) {
        rc = client_trace(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "request") == 0) {
        rc = client_raw(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "health") == 0) {
        rc = request(&c, "GET", "/healthz", NULL, NULL, 0);
        if (rc == 0) {
            rc = request(&c, "GET", "/readyz", NULL, NULL, 0);
        }
    } else {
        fprintf(errs, "shardplan client: unknown command '%s'\n", cmd);
        usage(errs);
        rc = 2;
    }
    srv_client_global_fini();
    return rc;
}
