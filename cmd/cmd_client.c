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
          "  bench PLAN_ID [--spec JSON] [--webhook URL]\n"
          "                                           queue a benchmark run\n"
          "  health                                   /healthz and /readyz\n"
          "URL and token also come from SHARDPLAN_SERVER and SHARDPLAN_TOKEN.\n"
          "One-line pipeline: shardplan example mlp | shardplan client --server URL plan -\n",
          f);
}

/* Sends one request; prints the answer. Returns an exit status. */
static int request(const client *c, const char *method, const char *path, const char *ctype,
                   const char *body, size_t body_len)
{
    char url[4096];
    snprintf(url, sizeof url, "%s%s", c->server, path);
    cm_buf resp;
    cm_buf_init(&resp);
    srv_client_req rq = {method, url, c->token, ctype, body, body_len};
    long status = 0;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = srv_client_request(&rq, &status, &resp, &e);
    if (st == CM_ENOMEM) {
        fprintf(c->errs, "shardplan client: %s\n", e.msg); /* no easy handle */
        cm_buf_fini(&resp);
        return 1;
    }
    int ret = 0;
    if (st != CM_OK) {
        fprintf(c->errs, "shardplan client: %s %s: %s\n", method, url, e.msg);
        ret = 1;
    } else if (status >= 400) {
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
    int rc = request(c, "POST", "/v1/runs", "application/json", b.data, b.len);
    cm_buf_fini(&b);
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
