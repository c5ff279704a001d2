/* SPDX-License-Identifier: Apache-2.0
 * server: jansson codecs for the HTTP API and the client (srv_json.h).
 * Every json_t below is marked new or borrowed; new references are released
 * at the function's out: label. */
#include "srv_json.h"

#include "sp_example.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static cm_status syntax_error(const json_error_t *je, cm_error *err)
{
    return cm_error_set(err, CM_EINVAL, "", "invalid JSON at line %d, column %d: %s", je->line,
                        je->column, je->text);
}

/* The len bytes at text parsed (flags as json_loadb's: JSON_DECODE_ANY for a
 * bare value): a new reference, or NULL after reporting the syntax error
 * (CM_EINVAL, line and column) in err. */
static json_t *parse(const char *text, size_t len, size_t flags, cm_error *err)
{
    json_error_t je;
    json_t *j = json_loadb(text, len, flags, &je);
    if (j == NULL) {
        syntax_error(&je, err);
    }
    return j;
}

/* A compact dump of j copied into arena a. */
static const char *dump_to_arena(const json_t *j, cm_arena *a, size_t *len_out)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL) {
        return NULL;
    }
    size_t n = strlen(s);
    char *copy = cm_arena_strndup(a, s, n);
    free(s);
    *len_out = n;
    return copy;
}

static bool dump_to_buf(const json_t *j, cm_buf *out)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL) {
        return false;
    }
    cm_buf_puts(out, s);
    free(s);
    return !out->oom;
}

/* ---- scanning without a tree ------------------------------------------------------------- */

static const char *scan_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
        p++;
    }
    return p;
}

/* p at '"': the byte after the closing quote, or NULL when unterminated. */
static const char *scan_string(const char *p, const char *e)
{
    for (p++; p < e; p++) {
        if (*p == '\\') {
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* p at a value: the byte after it, or NULL when the text ends first. Only
 * strings and brackets are followed: the parser validates later. */
static const char *scan_value(const char *p, const char *e)
{
    if (p >= e) {
        return NULL;
    }
    if (*p == '"') {
        return scan_string(p, e);
    }
    if (*p != '{' && *p != '[') {
        while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
               *p != '\r' && *p != '\t') {
            p++;
        }
        return p;
    }
    size_t depth = 0;
    for (; p < e; p++) {
        if (*p == '"') {
            p = scan_string(p, e);
            if (p == NULL) {
                return NULL;
            }
            p--;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (--depth == 0) {
                return p + 1;
            }
        }
    }
    return NULL;
}

/* Calls visit for each member of the object at p..e (key without quotes,
 * value span); false when the text is not an object of that shape or visit
 * returned false. */
typedef bool (*scan_member_fn)(const char *key, size_t key_len, const char *v, const char *v_end,
                               void *ctx);

static bool scan_object(const char *p, const char *e, scan_member_fn visit, void *ctx)
{
    p = scan_ws(p, e);
    if (p >= e || *p != '{') {
        return false;
    }
    p = scan_ws(p + 1, e);
    if (p < e && *p == '}') {
        return true;
    }
    while (p < e && *p == '"') {
        const char *k = p + 1, *ke = scan_string(p, e);
        if (ke == NULL) {
            return false;
        }
        p = scan_ws(ke, e);
        if (p >= e || *p != ':') {
            return false;
        }
        const char *v = scan_ws(p + 1, e), *ve = scan_value(v, e);
        if (ve == NULL || !visit(k, (size_t)(ke - 1 - k), v, ve, ctx)) {
            return false;
        }
        p = scan_ws(ve, e);
        if (p < e && *p == ',') {
            p = scan_ws(p + 1, e);
            continue;
        }
        return p < e && *p == '}';
    }
    return false;
}

static bool key_is(const char *k, size_t n, const char *want)
{
    return strlen(want) == n && memcmp(k, want, n) == 0;
}

static bool envelope_key(const char *k, size_t n, const char *v, const char *ve, void *ctx)
{
    (void)v;
    (void)ve;
    if (key_is(k, n, "graph") || key_is(k, n, "mlir") || key_is(k, n, "graph_id") ||
        key_is(k, n, "example")) {
        *(bool *)ctx = true;
    }
    return true;
}

bool srv_json_is_plan_envelope(const char *body, size_t len)
{
    bool env = false;
    return scan_object(body, body + len, envelope_key, &env) && env;
}

typedef struct mesh_scan {
    const char *at; /* the JSON Pointer of the object scanned: "" or "/graph" */
    cm_error *err;
    cm_status st;
} mesh_scan;

static bool mesh_too_big(mesh_scan *ms, const char *path, size_t n)
{
    ms->st = cm_error_set(ms->err, CM_EINVAL, path,
                          "mesh of %zu bytes: a mesh's text is at most %zu bytes (64 axes)", n,
                          SRV_MESH_MAX_BYTES);
    return false;
}

/* The members of a graph document: each element of "meshes". */
static bool graph_member(const char *k, size_t n, const char *v, const char *ve, void *ctx)
{
    mesh_scan *ms = ctx;
    if (!key_is(k, n, "meshes") || *v != '[') {
        return true;
    }
    const char *e = ve - 1, *p = scan_ws(v + 1, e);
    for (size_t i = 0; p < e; i++) {
        const char *x = scan_value(p, e);
        if (x == NULL) {
            return true; /* malformed: the parser says so */
        }
        if ((size_t)(x - p) > SRV_MESH_MAX_BYTES) {
            char path[64];
            snprintf(path, sizeof path, "%s/meshes/%zu", ms->at, i);
            return mesh_too_big(ms, path, (size_t)(x - p));
        }
        p = scan_ws(x, e);
        p = p < e && *p == ',' ? scan_ws(p + 1, e) : e;
    }
    return true;
}

static bool envelope_member(const char *k, size_t n, const char *v, const char *ve, void *ctx)
{
    mesh_scan *ms = ctx;
    if (key_is(k, n, "mesh") && (size_t)(ve - v) > SRV_MESH_MAX_BYTES) {
        return mesh_too_big(ms, "/mesh", (size_t)(ve - v));
    }
    if (key_is(k, n, "graph")) {
        ms->at = "/graph";
        (void)scan_object(v, ve, graph_member, ms);
        ms->at = "";
        return ms->st == CM_OK;
    }
    return true;
}

/* Both readings of the body at once: as an envelope and as a bare graph
 * document, each with its first mesh error. */
typedef struct sizes_scan {
    bool env;        /* an envelope key was seen */
    mesh_scan graph; /* the body read as a graph document */
    mesh_scan envl;  /* ... and as an envelope */
} sizes_scan;

static bool sizes_member(const char *k, size_t n, const char *v, const char *ve, void *ctx)
{
    sizes_scan *s = ctx;
    bool env = false;
    (void)envelope_key(k, n, v, ve, &env);
    s->env = s->env || env;
    if (s->graph.st == CM_OK) {
        (void)graph_member(k, n, v, ve, &s->graph);
    }
    if (s->envl.st == CM_OK) {
        (void)envelope_member(k, n, v, ve, &s->envl);
    }
    return true;
}

cm_status srv_json_mesh_sizes_check(const char *body, size_t len, bool *envelope_out,
                                    cm_error *err)
{
    cm_error eg, ee;
    cm_error_clear(&eg);
    cm_error_clear(&ee);
    sizes_scan s = {false, {"", &eg, CM_OK}, {"", &ee, CM_OK}};
    bool env = scan_object(body, body + len, sizes_member, &s) && s.env;
    if (envelope_out != NULL) {
        *envelope_out = env;
    }
    const mesh_scan *ms = env ? &s.envl : &s.graph;
    if (ms->st != CM_OK && err != NULL) {
        *err = *ms->err;
    }
    return ms->st;
}

/* An integer member (at path) of an "example" object in [lo, hi]. */
static cm_status example_int(const char *path, const json_t *v, int64_t lo, int64_t hi,
                             int64_t *out, cm_error *err)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        return cm_error_set(err, CM_EINVAL, path, "expected an integer in [%lld, %lld]",
                            (long long)lo, (long long)hi);
    }
    *out = (int64_t)json_integer_value(v);
    return CM_OK;
}

/* "example": {"model": "mlp"|"transformer", "layers", "d_model", "heads",
 * "seq", "batch", "train", "strategy": "dp"|"fsdp"|"tp"|"dp+tp",
 * "mesh": {"data": 2, "model": 4}}: the template of `shardplan example`
 * (planner/sp_example.h) generated as a graph document into the arena. */
static cm_status example_graph(const json_t *ex, cm_arena *a, srv_plan_req *out, cm_error *err)
{
    static const char *const strategies[] = {"dp", "fsdp", "tp", "dp+tp"};
    if (!json_is_object(ex)) {
        return cm_error_set(err, CM_EINVAL, "/example", "expected an object");
    }
    sp_example_opts o;
    sp_example_opts_init(&o);
    const char *key;
    json_t *v; /* borrowed */
    cm_status st = CM_OK;
    json_object_foreach((json_t *)(uintptr_t)ex, key, v)
    {
        char path[CM_ERROR_PATH_LEN];
        snprintf(path, sizeof path, "/example/%s", key);
        int64_t n = 0;
        if (strcmp(key, "model") == 0) {
            const char *m = json_string_value(v);
            if (m != NULL && strcmp(m, "mlp") == 0) {
                o.model = SP_EXAMPLE_MLP;
            } else if (m != NULL && strcmp(m, "transformer") == 0) {
                o.model = SP_EXAMPLE_TRANSFORMER;
            } else {
                return cm_error_set(err, CM_EINVAL, path, "expected \"mlp\" or \"transformer\"");
            }
        } else if (strcmp(key, "strategy") == 0) {
            const char *sn = json_string_value(v);
            size_t k = 0;
            while (k < 4 && (sn == NULL || strcmp(sn, strategies[k]) != 0)) {
                k++;
            }
            if (k == 4) {
                return cm_error_set(err, CM_EINVAL, path, "expected dp, fsdp, tp or dp+tp");
            }
            o.strategy = (sp_example_strategy)k;
        } else if (strcmp(key, "train") == 0) {
            if (!json_is_boolean(v)) {
                return cm_error_set(err, CM_EINVAL, path, "expected true or false");
            }
            o.train = json_is_true(v);
        } else if (strcmp(key, "layers") == 0) {
            /* the server generates the document: 4096 layers of a training
               step are ~60 MB of JSON, the most one request may make it build */
            st = example_int(path, v, 1, 4096, &n, err);
            o.layers = (uint32_t)n;
        } else if (strcmp(key, "d_model") == 0 || strcmp(key, "heads") == 0 ||
                   strcmp(key, "seq") == 0 || strcmp(key, "batch") == 0) {
            st = example_int(path, v, 1, (int64_t)1 << 24, &n, err);
            *(strcmp(key, "d_model") == 0 ? &o.d_model
              : strcmp(key, "heads") == 0 ? &o.heads
              : strcmp(key, "seq") == 0   ? &o.seq
                                          : &o.batch) = n;
        } else if (strcmp(key, "mesh") == 0) {
            if (!json_is_object(v) || json_object_size(v) == 0 ||
                json_object_size(v) > SP_EXAMPLE_MAX_AXES) {
                return cm_error_set(err, CM_EINVAL, path, "expected {\"axis\": size, ...} with 1 to %d axes",
                                    SP_EXAMPLE_MAX_AXES);
            }
            const char *ax;
            json_t *sz; /* borrowed */
            o.n_axes = 0;
            json_object_foreach(v, ax, sz)
            {
                if (strlen(ax) == 0 || strlen(ax) >= sizeof o.axis_names[0]) {
                    return cm_error_set(err, CM_EINVAL, path, "axis names are 1 to %zu bytes",
                                        sizeof o.axis_names[0] - 1);
                }
                char ap[CM_ERROR_PATH_LEN];
                snprintf(ap, sizeof ap, "/example/mesh/%.200s", ax);
                st = example_int(ap, sz, 1, 1 << 20, &n, err);
                if (st != CM_OK) {
                    break;
                }
                snprintf(o.axis_names[o.n_axes], sizeof o.axis_names[0], "%s", ax);
                o.axis_sizes[o.n_axes++] = n;
            }
        } else {
            return cm_error_set(err, CM_EINVAL, path, "unknown member '%s'", key);
        }
        if (st != CM_OK) {
            return st;
        }
    }
    cm_buf b;
    cm_buf_init(&b);
    st = sp_example_graph_json(&o, &b, err);
    if (st == CM_EINVAL && err != NULL) { /* the template names the option: "/d_model" */
        char p[CM_ERROR_PATH_LEN], m[CM_ERROR_MSG_LEN];
        snprintf(p, sizeof p, "/example%.200s", err->path);
        snprintf(m, sizeof m, "%s", err->msg);
        cm_error_clear(err); /* the first error is kept otherwise */
        cm_error_set(err, CM_EINVAL, p, "%s", m);
    } else if (st == CM_OK) {
        out->graph = cm_arena_strndup(a, b.data, b.len);
        out->graph_len = b.len;
        if (out->graph == NULL) {
            st = cm_error_oom(err);
        }
    }
    cm_buf_fini(&b);
    return st;
}

cm_status srv_json_plan_req_decode(const char *body, size_t len, cm_arena *a, srv_plan_req *out,
                                   cm_error *err)
{
    memset(out, 0, sizeof *out);
    cm_status st = CM_OK;
    json_t *j = parse(body, len, 0, err); /* new */
    if (j == NULL) {
        return CM_EINVAL;
    }
    if (!json_is_object(j)) {
        st = cm_error_set(err, CM_EINVAL, "", "expected a JSON object");
        goto out;
    }
    const char *key;
    json_t *v; /* borrowed */
    int n_sources = 0;
    json_object_foreach(j, key, v)
    {
        char path[CM_ERROR_PATH_LEN];
        snprintf(path, sizeof path, "/%s", key);
        if (strcmp(key, "graph") == 0) {
            if (!json_is_object(v)) {
                st = cm_error_set(err, CM_EINVAL, path, "expected a graph document (object)");
                goto out;
            }
            out->graph = dump_to_arena(v, a, &out->graph_len);
            out->graph_at = "/graph";
            n_sources++;
            if (out->graph == NULL) {
                st = cm_error_oom(err);
                goto out;
            }
        } else if (strcmp(key, "example") == 0) {
            st = example_graph(v, a, out, err);
            n_sources++;
            if (st != CM_OK) {
                goto out;
            }
        } else if (strcmp(key, "mlir") == 0) {
            if (!json_is_string(v)) {
                st = cm_error_set(err, CM_EINVAL, path, "expected MLIR text (string)");
                goto out;
            }
            out->mlir_len = json_string_length(v);
            out->mlir = cm_arena_strndup(a, json_string_value(v), out->mlir_len);
            n_sources++;
        } else if (strcmp(key, "graph_id") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) <= 0) {
                st = cm_error_set(err, CM_EINVAL, path, "expected a graph id (positive integer)");
                goto out;
            }
            out->graph_id = (int64_t)json_integer_value(v);
            n_sources++;
        } else if (strcmp(key, "mesh") == 0) {
            if (json_is_string(v)) {
                out->mesh_name = cm_arena_strdup(a, json_string_value(v));
            } else if (json_is_object(v)) {
                out->mesh = dump_to_arena(v, a, &out->mesh_len);
                json_t *nm = json_object_get(v, "name"); /* borrowed */
                if (nm != NULL && !json_is_string(nm)) {
                    st = cm_error_set(err, CM_EINVAL, "/mesh/name", "expected a string");
                    goto out;
                }
                out->mesh_name = cm_arena_strdup(a, nm != NULL ? json_string_value(nm) : "mesh");
            } else if (!json_is_null(v)) {
                st = cm_error_set(err, CM_EINVAL, path,
                                  "expected a stored mesh name or a mesh object");
                goto out;
            }
        } else if (strcmp(key, "options") == 0) {
            if (!json_is_object(v)) {
                st = cm_error_set(err, CM_EINVAL, path, "expected an object");
                goto out;
            }
            const char *ok;
            json_t *ov; /* borrowed */
            json_object_foreach(v, ok, ov)
            {
                char opath[CM_ERROR_PATH_LEN];
                snprintf(opath, sizeof opath, "/options/%s", ok);
                if (strcmp(ok, "pass") == 0 && json_is_string(ov)) {
                    out->pass = cm_arena_strdup(a, json_string_value(ov));
                } else if (strcmp(ok, "pass") == 0) {
                    st = cm_error_set(err, CM_EINVAL, opath, "expected a pass name (string)");
                    goto out;
                } else {
                    st = cm_error_set(err, CM_EINVAL, opath, "unknown option '%s'", ok);
                    goto out;
                }
            }
        } else if (strcmp(key, "name") == 0) {
            if (!json_is_string(v)) {
                st = cm_error_set(err, CM_EINVAL, path, "expected a string");
                goto out;
            }
            out->name = cm_arena_strdup(a, json_string_value(v));
        } else {
            st = cm_error_set(err, CM_EINVAL, path, "unknown member '%s'", key);
            goto out;
        }
    }
    if (n_sources != 1) {
        st = cm_error_set(err, CM_EINVAL, "",
                          "give exactly one of \"graph\", \"mlir\", \"graph_id\" and "
                          "\"example\"");
    }
out:
    json_decref(j);
    return st;
}

/* Replaces (or adds) the axes etc. of the mesh in meshes. */
static cm_status apply_mesh(json_t *doc, const srv_named_doc *mesh, cm_error *err)
{
    json_t *m = parse(mesh->body, mesh->body_len, 0, err); /* new */
    if (m == NULL) {
        return CM_EINVAL;
    }
    cm_status st = CM_OK;
    if (!json_is_object(m)) {
        st = cm_error_set(err, CM_EINVAL, "/mesh", "expected a mesh object");
        goto out;
    }
    json_t *meshes = json_object_get(doc, "meshes"); /* borrowed */
    if (meshes == NULL) {
        meshes = json_array();
        if (meshes == NULL || json_object_set_new(doc, "meshes", meshes) != 0) {
            st = cm_error_oom(err);
            goto out;
        }
    }
    if (!json_is_array(meshes)) {
        st = cm_error_set(err, CM_EINVAL, "/meshes", "expected an array");
        goto out;
    }
    size_t idx = (size_t)-1, i;
    json_t *x; /* borrowed */
    json_array_foreach(meshes, i, x)
    {
        json_t *nm = json_object_get(x, "name"); /* borrowed */
        if (json_is_string(nm) && strcmp(json_string_value(nm), mesh->name) == 0) {
            idx = i;
        }
    }
    if (idx == (size_t)-1 && json_array_size(meshes) == 1) {
        idx = 0;
    }
    if (idx == (size_t)-1 && json_array_size(meshes) > 1) {
        st = cm_error_set(err, CM_EINVAL, "/mesh",
                          "the graph has several meshes and none is named '%s'", mesh->name);
        goto out;
    }
    json_t *copy = json_deep_copy(m); /* new */
    if (copy == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    json_t *nm = NULL; /* new: the name the document's shardings use */
    if (idx != (size_t)-1) {
        nm = json_incref(json_object_get(json_array_get(meshes, idx), "name"));
    }
    json_object_set_new(copy, "name", nm != NULL ? nm : json_string(mesh->name));
    if (idx != (size_t)-1) {
        json_array_set_new(meshes, idx, copy);
    } else {
        json_array_append_new(meshes, copy);
    }
out:
    json_decref(m);
    return st;
}

cm_status srv_json_graph_merge(const char *graph, size_t len, const srv_named_doc *mesh,
                               const srv_named_doc *rules, size_t n_rules, cm_buf *out,
                               cm_error *err)
{
    json_t *doc = parse(graph, len, 0, err); /* new */
    if (doc == NULL) {
        return CM_EINVAL;
    }
    cm_status st = CM_OK;
    if (!json_is_object(doc)) {
        st = cm_error_set(err, CM_EINVAL, "", "expected a graph document (object)");
        goto out;
    }
    if (mesh != NULL) {
        st = apply_mesh(doc, mesh, err);
        if (st != CM_OK) {
            goto out;
        }
    }
    if (n_rules > 0) {
        json_t *cr = json_object_get(doc, "custom_rules"); /* borrowed */
        if (cr == NULL) {
            cr = json_object();
            json_object_set_new(doc, "custom_rules", cr);
        }
        if (!json_is_object(cr)) {
            st = cm_error_set(err, CM_EINVAL, "/custom_rules", "expected an object");
            goto out;
        }
        for (size_t i = 0; i < n_rules; i++) {
            if (json_object_get(cr, rules[i].name) != NULL) {
                continue; /* the document's own rule wins */
            }
            json_t *r = json_loadb(rules[i].body, rules[i].body_len, JSON_DECODE_ANY, NULL);
            if (r == NULL) {
                st = cm_error_set(err, CM_EINTERNAL, NULL, "stored rule '%s' is not JSON",
                                  rules[i].name);
                goto out;
            }
            json_object_set_new(cr, rules[i].name, r);
        }
    }
    if (!dump_to_buf(doc, out)) {
        st = cm_error_oom(err);
    }
out:
    json_decref(doc);
    return st;
}

cm_status srv_json_mesh_graph(const char *name, const char *body, size_t len, cm_buf *out,
                              cm_error *err)
{
    json_t *m = parse(body, len, 0, err); /* new */
    if (m == NULL) {
        return CM_EINVAL;
    }
    cm_status st = CM_OK;
    json_t *doc = NULL; /* new */
    if (!json_is_object(m)) {
        st = cm_error_set(err, CM_EINVAL, "", "expected a mesh object {\"axes\": [...]}");
        goto out;
    }
    json_object_set_new(m, "name", json_string(name));
    doc = json_pack("{s:[O],s:[]}", "meshes", m, "ops");
    if (doc == NULL || !dump_to_buf(doc, out)) {
        st = cm_error_oom(err);
    }
out:
    json_decref(doc);
    json_decref(m);
    return st;
}

cm_status srv_json_rules_graph(const srv_named_doc *rules, size_t n, cm_buf *out, cm_error *err)
{
    cm_status st = CM_OK;
    json_t *cr = json_object();                        /* new */
    json_t *doc = json_pack("{s:O,s:[]}", "custom_rules", cr, "ops"); /* new */
    if (cr == NULL || doc == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *r = parse(rules[i].body, rules[i].body_len, JSON_DECODE_ANY, err); /* new */
        if (r == NULL) {
            st = CM_EINVAL;
            goto out;
        }
        json_object_set_new(cr, rules[i].name, r);
    }
    if (!dump_to_buf(doc, out)) {
        st = cm_error_oom(err);
    }
out:
    json_decref(doc);
    json_decref(cr);
    return st;
}

bool srv_json_mesh_name_ok(const char *name)
{
    const char *s = name;
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) {
        return false;
    }
    for (; *s != '\0'; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '$' || c == '.')) {
            return false;
        }
    }
    return s - name < 256;
}

/* Whether the len bytes at s hold the NUL-terminated needle. */
static bool has_bytes(const char *s, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = s; n <= len && (size_t)(p - s) <= len - n; p++) {
        p = memchr(p, needle[0], len - n - (size_t)(p - s) + 1);
        if (p == NULL) {
            return false;
        }
        if (memcmp(p, needle, n) == 0) {
            return true;
        }
    }
    return false;
}

cm_status srv_json_rules_canon(const char *doc, size_t len, cm_buf *out, cm_error *err)
{
    /* Without the key spelled out and without \u escapes no member can
     * decode to "custom_rules": nothing to add, and the planner's reader
     * checks syntax and mesh names. This spares a whole parse per plan. */
    if (!has_bytes(doc, len, "\"custom_rules\"") && !has_bytes(doc, len, "\\u")) {
        return CM_OK;
    }
    json_t *j = parse(doc, len, 0, err); /* new */
    if (j == NULL) {
        return CM_EINVAL;
    }
    cm_status st = CM_OK;
    size_t i;
    json_t *m; /* borrowed */
    json_array_foreach(json_object_get(j, "meshes"), i, m)
    {
        const char *nm = json_string_value(json_object_get(m, "name"));
        if (nm != NULL && !srv_json_mesh_name_ok(nm)) {
            char path[64];
            snprintf(path, sizeof path, "/meshes/%zu/name", i);
            st = cm_error_set(err, CM_EINVAL, path,
                              "mesh name '%.100s' is not an MLIR identifier "
                              "([A-Za-z_][A-Za-z0-9_$.]*): the stored plan would not read back",
                              nm);
            json_decref(j);
            return st;
        }
    }
    json_t *cr = json_object_get(j, "custom_rules"); /* borrowed */
    if (json_is_object(cr) && json_object_size(cr) > 0) {
        char *s = json_dumps(cr, JSON_COMPACT | JSON_SORT_KEYS);
        if (s == NULL) {
            st = cm_error_oom(err);
        } else {
            cm_buf_puts(out, s);
            free(s);
        }
    }
    json_decref(j);
    return st;
}

cm_status srv_json_check(const char *body, size_t len, bool is_object, cm_error *err)
{
    json_t *j = parse(body, len, JSON_DECODE_ANY, err); /* new */
    if (j == NULL) {
        return CM_EINVAL;
    }
    cm_status st = CM_OK;
    if (is_object && !json_is_object(j)) {
        st = cm_error_set(err, CM_EINVAL, "", "expected a JSON object");
    }
    json_decref(j);
    return st;
}

const char *srv_json_get_string(const char *body, size_t len, const char *key, cm_arena *a)
{
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je); /* new */
    const char *value = NULL;
    if (j != NULL && json_is_string(json_object_get(j, key))) {
        value = cm_arena_strdup(a, json_string_value(json_object_get(j, key)));
    }
    json_decref(j);
    return value;
}

const char *srv_json_get_name(const char *body, size_t len, cm_arena *a)
{
    return srv_json_get_string(body, len, "name", a);
}

cm_status srv_json_run_req_decode(const char *body, size_t len, cm_arena *a, srv_run_req *out,
                                  cm_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *j = parse(body, len, 0, err); /* new */
    if (j == NULL) {
        return CM_EINVAL;
    }
    cm_status st = CM_OK;
    if (!json_is_object(j)) {
        st = cm_error_set(err, CM_EINVAL, "", "expected a JSON object");
        goto out;
    }
    const char *key;
    json_t *v; /* borrowed */
    json_object_foreach(j, key, v)
    {
        char path[CM_ERROR_PATH_LEN];
        snprintf(path, sizeof path, "/%s", key);
        if (strcmp(key, "plan_id") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) <= 0) {
                st = cm_error_set(err, CM_EINVAL, path, "expected a plan id (positive integer)");
                goto out;
            }
            out->plan_id = (int64_t)json_integer_value(v);
        } else if (strcmp(key, "spec") == 0) {
            if (!json_is_object(v)) {
                st = cm_error_set(err, CM_EINVAL, path, "expected an object");
                goto out;
            }
            out->spec = dump_to_arena(v, a, &out->spec_len);
        } else if (strcmp(key, "webhook_url") == 0) {
            if (!json_is_string(v)) {
                st = cm_error_set(err, CM_EINVAL, path, "expected a URL (string)");
                goto out;
            }
            out->webhook_url = cm_arena_strdup(a, json_string_value(v));
        } else {
            st = cm_error_set(err, CM_EINVAL, path, "unknown member '%s'", key);
            goto out;
        }
    }
    if (out->plan_id == 0) {
        st = cm_error_set(err, CM_EINVAL, "/plan_id", "missing: the plan to benchmark");
        goto out;
    }
    if (out->spec == NULL) {
        out->spec = "{}";
        out->spec_len = 2;
    }
out:
    json_decref(j);
    return st;
}

void srv_bench_spec_init(srv_bench_spec *s)
{
    memset(s, 0, sizeof *s);
    s->warmup = 1;
    s->iters = 5;
    s->seed = 1;
    s->affinity = -1;
}

/* One spec member: *known tells whether key is one; errors name path. */
static cm_status bench_member(const char *key, json_t *v, const char *path, srv_bench_spec *s,
                              bool *known, cm_error *err)
{
    static const struct {
        const char *name;
        json_int_t lo, hi;
    } lim[] = {{"devices", 0, SRV_BENCH_MAX_DEVICES},
               {"warmup", 0, 1000},
               {"iters", 1, 100000},
               {"seed", 0, INT64_MAX}};
    *known = true;
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        if (strcmp(key, lim[i].name) != 0) {
            continue;
        }
        if (!json_is_integer(v) || json_integer_value(v) < lim[i].lo ||
            json_integer_value(v) > lim[i].hi) {
            return cm_error_set(err, CM_EINVAL, path, "expected an integer in %lld..%lld",
                                (long long)lim[i].lo, (long long)lim[i].hi);
        }
        json_int_t x = json_integer_value(v);
        if (i == 0) {
            s->devices = (uint32_t)x;
        } else if (i == 1) {
            s->warmup = (uint32_t)x;
        } else if (i == 2) {
            s->iters = (uint32_t)x;
        } else {
            s->seed = (uint64_t)x;
        }
        return CM_OK;
    }
    if (strcmp(key, "affinity") == 0) {
        if (!json_is_boolean(v)) {
            return cm_error_set(err, CM_EINVAL, path, "expected true or false");
        }
        s->affinity = json_is_true(v) ? 1 : 0;
        return CM_OK;
    }
    if (strcmp(key, "fault") == 0) {
        const char *f = json_is_string(v) ? json_string_value(v) : "";
        if (strcmp(f, "crash") != 0 && strcmp(f, "hang") != 0 && strcmp(f, "oom") != 0) {
            return cm_error_set(err, CM_EINVAL, path, "expected crash, hang or oom");
        }
        snprintf(s->fault, sizeof s->fault, "%s", f);
        return CM_OK;
    }
    *known = false;
    return CM_OK;
}

cm_status srv_json_bench_req_decode(const char *body, size_t len, cm_arena *a, bool allow_fault,
                                    srv_run_req *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *j = parse(body, len, 0, err); /* new */
    if (j == NULL) {
        return CM_EINVAL;
    }
    json_t *spec = json_object(); /* new */
    cm_status st = CM_OK;
    if (spec == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    if (!json_is_object(j)) {
        st = cm_error_set(err, CM_EINVAL, "", "expected a JSON object");
        goto out;
    }
    srv_bench_spec s;
    srv_bench_spec_init(&s);
    const char *key;
    json_t *v; /* borrowed */
    json_object_foreach(j, key, v)
    {
        char path[CM_ERROR_PATH_LEN];
        snprintf(path, sizeof path, "/%s", key);
        bool known = false;
        if (strcmp(key, "plan_id") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) <= 0) {
                st = cm_error_set(err, CM_EINVAL, path, "expected a plan id (positive integer)");
                goto out;
            }
            out->plan_id = (int64_t)json_integer_value(v);
        } else if (strcmp(key, "webhook_url") == 0) {
            if (!json_is_string(v)) {
                st = cm_error_set(err, CM_EINVAL, path, "expected a URL (string)");
                goto out;
            }
            out->webhook_url = cm_arena_strdup(a, json_string_value(v));
        } else if (strcmp(key, "fault") == 0 && !allow_fault) {
            st = cm_error_set(err, CM_EINVAL, path, "test faults are not enabled on this server");
            goto out;
        } else {
            st = bench_member(key, v, path, &s, &known, err);
            if (st != CM_OK) {
                goto out;
            }
            if (!known) {
                st = cm_error_set(err, CM_EINVAL, path, "unknown member '%s'", key);
                goto out;
            }
            if (json_object_set(spec, key, v) != 0) {
                st = cm_error_oom(err);
                goto out;
            }
        }
    }
    if (out->plan_id == 0) {
        st = cm_error_set(err, CM_EINVAL, "/plan_id", "missing: the plan to benchmark");
        goto out;
    }
    out->spec = dump_to_arena(spec, a, &out->spec_len);
    if (out->spec == NULL) {
        st = cm_error_oom(err);
    }
out:
    json_decref(spec);
    json_decref(j);
    return st;
}

cm_status srv_json_bench_spec_decode(const char *spec, size_t len, srv_bench_spec *out,
                                     cm_error *err)
{
    srv_bench_spec_init(out);
    json_t *j = parse(spec, len, 0, err); /* new */
    if (j == NULL) {
        return CM_EINVAL;
    }
    cm_status st = CM_OK;
    const char *key;
    json_t *v; /* borrowed */
    json_object_foreach(j, key, v)
    {
        char path[CM_ERROR_PATH_LEN];
        snprintf(path, sizeof path, "/spec/%s", key);
        bool known;
        st = bench_member(key, v, path, out, &known, err);
        if (st != CM_OK) {
            break;
        }
    }
    json_decref(j);
    return st;
}

cm_status srv_json_token_req_decode(const char *body, size_t len, cm_arena *a,
                                    srv_token_req *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *j = parse(body, len, 0, err); /* new */
    if (j == NULL) {
        return CM_EINVAL;
    }
    cm_status st = CM_OK;
    json_t *scope = json_object_get(j, "scope"); /* borrowed */
    json_t *label = json_object_get(j, "label"); /* borrowed */
    const char *key;
    json_t *v; /* borrowed */
    if (!json_is_object(j)) {
        st = cm_error_set(err, CM_EINVAL, "", "expected an object {\"scope\": ..., \"label\": ...}");
        json_decref(j);
        return st;
    }
    json_object_foreach(j, key, v)
    {
        if (strcmp(key, "scope") != 0 && strcmp(key, "label") != 0) {
            char path[CM_ERROR_PATH_LEN];
            snprintf(path, sizeof path, "/%.200s", key);
            st = cm_error_set(err, CM_EINVAL, path, "unknown member '%.200s'", key);
            json_decref(j);
            return st;
        }
    }
    if (!json_is_string(scope)) {
        st = cm_error_set(err, CM_EINVAL, "/scope", "expected \"read\", \"write\" or \"admin\"");
    } else if (label != NULL && !json_is_string(label)) {
        st = cm_error_set(err, CM_EINVAL, "/label", "expected a string");
    } else {
        out->scope = cm_arena_strdup(a, json_string_value(scope));
        out->label = label != NULL ? cm_arena_strdup(a, json_string_value(label)) : NULL;
    }
    json_decref(j);
    return st;
}

/* ---- client side ---------------------------------------------------------------------- */

bool srv_json_error_text(const char *body, size_t len, char *buf, size_t cap)
{
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je); /* new */
    json_t *e = j != NULL ? json_object_get(j, "error") : NULL; /* borrowed */
    bool ok = json_is_object(e);
    if (ok) {
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        const char *path = json_string_value(json_object_get(e, "path"));
        snprintf(buf, cap, "%s: %s%s%s", code != NULL ? code : "error", msg != NULL ? msg : "",
                 path != NULL && path[0] != '\0' ? " at " : "", path != NULL ? path : "");
    }
    json_decref(j);
    return ok;
}

static void print_scalar(const json_t *v, FILE *out, int width)
{
    char tmp[64];
    const char *s = tmp;
    if (json_is_string(v)) {
        s = json_string_value(v);
    } else if (json_is_integer(v)) {
        snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_real(v)) {
        /* the shortest text that reads back as the same double (no 3.14573e+06) */
        double d = json_real_value(v);
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(tmp, sizeof tmp, "%.*g", digits, d);
            if (strtod(tmp, NULL) == d) {
                break;
            }
        }
    } else if (json_is_true(v)) {
        s = "true";
    } else if (json_is_false(v)) {
        s = "false";
    } else if (v == NULL || json_is_null(v)) {
        s = "-";
    } else {
        s = json_is_array(v) ? "[...]" : "{...}";
    }
    fprintf(out, "%-*.*s", width, width > 0 ? width : 1 << 20, s);
}

void srv_json_print_table(const char *body, size_t len, FILE *out)
{
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je); /* new */
    if (j == NULL || !json_is_object(j)) {
        fwrite(body, 1, len, out);
        json_decref(j);
        return;
    }
    json_t *items = json_object_get(j, "items"); /* borrowed */
    if (json_is_array(items)) {
        const char *cols[16];
        size_t n_cols = 0;
        json_t *first = json_array_get(items, 0);
        const char *key;
        json_t *v;
        json_object_foreach(first, key, v)
        {
            if (n_cols < 16 && !json_is_object(v) && !json_is_array(v)) {
                cols[n_cols++] = key;
            }
        }
        for (size_t c = 0; c < n_cols; c++) {
            fprintf(out, "%-18.18s ", cols[c]);
        }
        fputc('\n', out);
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it)
        {
            for (size_t c = 0; c < n_cols; c++) {
                print_scalar(json_object_get(it, cols[c]), out, 18);
                fputc(' ', out);
            }
            fputc('\n', out);
        }
        json_t *next = json_object_get(j, "next_after");
        if (json_is_integer(next) && json_integer_value(next) != 0) {
            fprintf(out, "(more: --after %" JSON_INTEGER_FORMAT ")\n", json_integer_value(next));
        }
    } else {
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v)
        {
            fprintf(out, "%-14s ", key);
            if (json_is_object(v) || json_is_array(v)) {
                char *s = json_dumps(v, JSON_COMPACT);
                size_t n = s != NULL ? strlen(s) : 0;
                if (n > 200) {
                    fprintf(out, "%.200s... (%zu bytes)", s, n);
                } else if (s != NULL) {
                    fputs(s, out);
                }
                free(s);
            } else {
                print_scalar(v, out, 0);
            }
            fputc('\n', out);
        }
    }
    json_decref(j);
}

cm_status srv_json_plan_envelope(const char *doc, size_t len, bool is_mlir, const char *mesh,
                                 const char *pass, cm_buf *out, cm_error *err)
{
    cm_status st = CM_OK;
    json_t *env = json_object(); /* new */
    if (env == NULL) {
        return cm_error_oom(err);
    }
    if (is_mlir) {
        json_object_set_new(env, "mlir", json_stringn(doc, len));
    } else {
        json_t *g = parse(doc, len, 0, err); /* new */
        if (g == NULL) {
            st = CM_EINVAL;
            goto out;
        }
        json_object_set_new(env, "graph", g);
    }
    if (mesh != NULL) {
        json_object_set_new(env, "mesh", json_string(mesh));
    }
    if (pass != NULL) {
        json_object_set_new(env, "options", json_pack("{s:s}", "pass", pass));
    }
    if (!dump_to_buf(env, out)) {
        st = cm_error_oom(err);
    }
out:
    json_decref(env);
    return st;
}
