/* SPDX-License-Identifier: Apache-2.0
 * planner: the advisor's scan of a graph document for Flax logical axis names
 * without a logical_axis_rules entry (such a dimension silently replicates).
 * The document has already been decoded by sp_graph_decode, so this walk
 * only reads what is there and never reports syntax errors. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "sp_advise_int.h"

typedef struct scan {
    cm_arena *a;
    json_t *rules; /* borrowed, or NULL */
    sp_logical_miss *items;
    uint32_t n, cap;
    bool oom;
} scan;

static bool has_rule(const scan *s, const char *name)
{
    size_t n = json_is_array(s->rules) ? json_array_size(s->rules) : 0;
    for (size_t i = 0; i < n; i++) {
        const char *l = json_string_value(json_array_get(json_array_get(s->rules, i), 0));
        if (l != NULL && strcmp(l, name) == 0) {
            return true;
        }
    }
    return false;
}

static void add(scan *s, const char *logical, const char *value, const char *path, uint32_t dim)
{
    if (s->n == s->cap) {
        uint32_t cap = s->cap == 0 ? 8 : s->cap * 2;
        sp_logical_miss *p = cm_arena_alloc(s->a, sizeof *p * cap);
        if (p == NULL) {
            s->oom = true;
            return;
        }
        if (s->n > 0) {
            memcpy(p, s->items, sizeof *p * s->n);
        }
        s->items = p;
        s->cap = cap;
    }
    sp_logical_miss *m = &s->items[s->n];
    m->logical = cm_arena_strdup(s->a, logical);
    m->value = cm_arena_strdup(s->a, value != NULL ? value : "");
    m->path = cm_arena_strdup(s->a, path);
    m->dim = dim;
    if (m->logical == NULL || m->value == NULL || m->path == NULL) {
        s->oom = true;
        return;
    }
    s->n++;
}

/* names: the logical_axes array; value: the name of the value; path: its pointer. */
static void check_names(scan *s, json_t *names, const char *value, const char *path)
{
    if (!json_is_array(names)) {
        return;
    }
    for (size_t i = 0; i < json_array_size(names); i++) {
        const char *n = json_string_value(json_array_get(names, i));
        if (n != NULL && !has_rule(s, n)) {
            char p[CM_ERROR_PATH_LEN];
            snprintf(p, sizeof p, "%s/%zu", path, i);
            add(s, n, value, p, (uint32_t)i);
        }
    }
}

/* A value object with "logical_axes" or "sharding": {"logical": [...]}. */
static void check_value(scan *s, json_t *o, const char *value, const char *path)
{
    char p[CM_ERROR_PATH_LEN];
    if (!json_is_object(o)) {
        return;
    }
    snprintf(p, sizeof p, "%s/logical_axes", path);
    check_names(s, json_object_get(o, "logical_axes"), value, p);
    json_t *sh = json_object_get(o, "sharding");
    if (json_is_object(sh)) {
        snprintf(p, sizeof p, "%s/sharding/logical", path);
        check_names(s, json_object_get(sh, "logical"), value, p);
    }
}

static const char *name_of(json_t *o, const char *key)
{
    const char *n = json_string_value(json_object_get(o, key));
    return n == NULL ? "" : n[0] == '%' ? n + 1 : n;
}

static void scan_ops(scan *s, json_t *ops, const char *path, unsigned depth);

static void scan_fn(scan *s, json_t *f, const char *path)
{
    char p[CM_ERROR_PATH_LEN];
    json_t *ins = json_object_get(f, "inputs");
    for (size_t i = 0; json_is_array(ins) && i < json_array_size(ins); i++) {
        json_t *in = json_array_get(ins, i);
        snprintf(p, sizeof p, "%s/inputs/%zu", path, i);
        check_value(s, in, name_of(in, "name"), p);
    }
    snprintf(p, sizeof p, "%s/ops", path);
    scan_ops(s, json_object_get(f, "ops"), p, 0);
    json_t *outs = json_object_get(f, "outputs");
    for (size_t i = 0; json_is_array(outs) && i < json_array_size(outs); i++) {
        json_t *o = json_array_get(outs, i);
        snprintf(p, sizeof p, "%s/outputs/%zu", path, i);
        check_value(s, o, name_of(o, "value"), p);
    }
}

static void scan_ops(scan *s, json_t *ops, const char *path, unsigned depth)
{
    char p[CM_ERROR_PATH_LEN];
    if (depth > 32) {
        return; /* the decoder's nesting limit */
    }
    for (size_t i = 0; json_is_array(ops) && i < json_array_size(ops); i++) {
        json_t *op = json_array_get(ops, i);
        snprintf(p, sizeof p, "%s/%zu", path, i);
        check_value(s, op, name_of(op, "result"), p);
        json_t *rs = json_object_get(op, "results");
        for (size_t r = 0; json_is_array(rs) && r < json_array_size(rs); r++) {
            char q[CM_ERROR_PATH_LEN];
            if (snprintf(q, sizeof q, "%s/results/%zu", p, r) >= (int)sizeof q) {
                continue; /* too deep to name */
            }
            check_value(s, json_array_get(rs, r), name_of(json_array_get(rs, r), "name"), q);
        }
        json_t *regs = json_object_get(op, "regions");
        for (size_t r = 0; json_is_array(regs) && r < json_array_size(regs); r++) {
            char q[CM_ERROR_PATH_LEN];
            if (snprintf(q, sizeof q, "%s/regions/%zu/ops", p, r) >= (int)sizeof q) {
                continue;
            }
            scan_ops(s, json_object_get(json_array_get(regs, r), "ops"), q, depth + 1);
        }
    }
}

cm_status sp_advise_logical_scan(const char *text, size_t len, cm_arena *a, sp_logical_miss **out,
                                 uint32_t *n_out, cm_error *err)
{
    *out = NULL;
    *n_out = 0;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je); /* new reference */
    if (!json_is_object(root)) {
        json_decref(root);
        return CM_OK;
    }
    scan s;
    memset(&s, 0, sizeof s);
    s.a = a;
    s.rules = json_object_get(root, "logical_axis_rules");
    json_t *fns = json_object_get(root, "functions");
    if (json_is_array(fns)) {
        for (size_t i = 0; i < json_array_size(fns); i++) {
            char p[CM_ERROR_PATH_LEN];
            snprintf(p, sizeof p, "/functions/%zu", i);
            scan_fn(&s, json_array_get(fns, i), p);
        }
    } else {
        scan_fn(&s, root, "");
    }
    json_decref(root);
    if (s.oom) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory scanning logical axes");
    }
    *out = s.items;
    *n_out = s.n;
    return CM_OK;
}
