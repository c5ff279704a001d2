/* SPDX-License-Identifier: Apache-2.0
 * server: `shardplan client` over libcurl (srv_client.h). One easy handle
 * per command; the response body accumulates in a cm_buf; errors are the
 * server's {"error":{...}} message, or curl's when nothing came back. */
#include "srv_client.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cm.h"
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

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    cm_buf *b = userdata;
    cm_buf_append(b, ptr, size * nmemb);
    return b->oom ? 0 : size * nmemb;
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    (void)ptr;
    (void)userdata;
    return size * nmemb;
}

cm_status srv_client_post_json(const char *url, const char *body, size_t body_len, double timeout_s,
                               long *status_out, cm_error *err)
{
    *status_out = 0;
    CURL *h = curl_easy_init();
    if (h == NULL) {
        return cm_error_set(err, CM_EIO, NULL, "cannot initialize libcurl");
    }
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = hdrs != NULL ? curl_slist_append(hdrs, "Expect:") : NULL;
    hdrs = h2 != NULL ? h2 : hdrs;
    long ms = (long)(timeout_s * 1000);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status_out);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        return cm_error_set(err, CM_EIO, NULL, "%s", curl_easy_strerror(rc));
    }
    return CM_OK;
}

/* Sends one request; prints the answer. Returns an exit status. */
static int request(const client *c, const char *method, const char *path, const char *ctype,
                   const char *body, size_t body_len)
{
    CURL *h = curl_easy_init();
    if (h == NULL) {
        fprintf(c->errs, "shardplan client: cannot initialize libcurl\n");
        return 1;
    }
    char url[4096];
    snprintf(url, sizeof url, "%s%s", c->server, path);
    cm_buf resp;
    cm_buf_init(&resp);
    struct curl_slist *hdrs = NULL;
    char auth[600];
    if (c->token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (ctype != NULL) {
        char ct[128];
        snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
        hdrs = curl_slist_append(hdrs, ct);
    }
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    }
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    int ret = 0;
    if (rc != CURLE_OK) {
        fprintf(c->errs, "shardplan client: %s %s: %s\n", method, url, curl_easy_strerror(rc));
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

static int read_input(const client *c, const char *file, char **data, size_t *len)
{
    cm_error e;
    cm_error_clear(&e);
    if (cm_file_read(file, data, len, &e) != CM_OK) {
        fprintf(c->errs, "shardplan client: %s: %s\n", file, e.msg);
        return 1;
    }
    return 0;
}

static int cmd_submit(const client *c, int argc, char **argv)
{
    const char *file = positional(argc, argv, 1, 0);
    if (file == NULL) {
        usage(c->errs);
        return 2;
    }
    char *data = NULL;
    size_t len = 0;
    if (read_input(c, file, &data, &len) != 0) {
        return 1;
    }
    char path[600] = "/v1/graphs";
    const char *name = opt_value(argc, argv, "--name");
    if (name != NULL) {
        char esc[500];
        url_escape(name, esc, sizeof esc);
        snprintf(path, sizeof path, "/v1/graphs?name=%s", esc);
    }
    int rc = request(c, "POST", path, looks_json(data, len) ? "application/json" : "text/plain",
                     data, len);
    cm_free(data);
    return rc;
}

static int cmd_plan(const client *c, int argc, char **argv)
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
        cm_buf_printf(&env, "{\"graph_id\":%lld", id);
        if (mesh != NULL) {
            cm_buf_puts(&env, ",\"mesh\":");
            srv_json_put_str(&env, mesh);
        }
        if (pass != NULL) {
            cm_buf_puts(&env, ",\"options\":{\"pass\":");
            srv_json_put_str(&env, pass);
            cm_buf_putc(&env, '}');
        }
        cm_buf_putc(&env, '}');
    } else {
        const char *file = positional(argc, argv, 1, 0);
        if (file == NULL) {
            usage(c->errs);
            return 2;
        }
        char *data = NULL;
        size_t len = 0;
        if (read_input(c, file, &data, &len) != 0) {
            return 1;
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

static int cmd_get_delete(const client *c, int argc, char **argv, const char *method)
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

static int cmd_list(const client *c, int argc, char **argv)
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

static int cmd_put(const client *c, int argc, char **argv)
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

static int cmd_compare(const client *c, int argc, char **argv)
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

static int cmd_bench(const client *c, int argc, char **argv)
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
    cm_buf_printf(&b, "{\"plan_id\":%lld", id);
    if (spec != NULL) {
        cm_buf_puts(&b, ",\"spec\":");
        cm_buf_puts(&b, spec);
    }
    if (hook != NULL) {
        cm_buf_puts(&b, ",\"webhook_url\":");
        srv_json_put_str(&b, hook);
    }
    cm_buf_putc(&b, '}');
    int rc = request(c, "POST", "/v1/runs", "application/json", b.data, b.len);
    cm_buf_fini(&b);
    return rc;
}

int srv_client_main(int argc, char **argv, FILE *out, FILE *errs)
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
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(errs, "shardplan client: cannot initialize libcurl\n");
        return 1;
    }
    int rc;
    if (strcmp(cmd, "submit") == 0) {
        rc = cmd_submit(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "plan") == 0) {
        rc = cmd_plan(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "get") == 0) {
        rc = cmd_get_delete(&c, sub_argc, sub_argv, "GET");
    } else if (strcmp(cmd, "delete") == 0) {
        rc = cmd_get_delete(&c, sub_argc, sub_argv, "DELETE");
    } else if (strcmp(cmd, "list") == 0) {
        rc = cmd_list(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "put") == 0) {
        rc = cmd_put(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "compare") == 0) {
        rc = cmd_compare(&c, sub_argc, sub_argv);
    } else if (strcmp(cmd, "bench") == 0) {
        rc = cmd_bench(&c, sub_argc, sub_argv);
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
    curl_global_cleanup();
    return rc;
}
