/* SPDX-License-Identifier: Apache-2.0
 * planner: the what-if's JSON codecs (sp_whatif.h, docs/advisor.md "What-if"):
 * edits and value references of the advisor contract, and the what-if
 * request body. The only what-if file that sees jansson; every error names
 * the JSON Pointer of the offending member. */
#include "sp_whatif.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sp_advise_int.h"

typedef struct dec {
    sp_edit_list *l;
    cm_error *err;
    cm_status st;
} dec;

__attribute__((format(printf, 3, 4))) static cm_status fail(dec *d, const char *path,
                                                            const char *fmt, ...)
{
    if (d->st == CM_OK) {
        va_list ap;
        va_start(ap, fmt);
        d->st = cm_error_setv(d->err, CM_EINVAL, path, fmt, ap);
        va_end(ap);
    }
    return d->st;
}

static const char *dup_str(dec *d, const char *s)
{
    char *c = cm_arena_strdup(&d->l->arena, s);
    if (c == NULL && d->st == CM_OK) {
        d->st = cm_error_set(d->err, CM_ENOMEM, NULL, "out of memory decoding edits");
    }
    return c;
}

/* A non-negative integer member (absent: dflt). */
static bool get_index(dec *d, json_t *o, const char *key, const char *base, uint32_t dflt,
                      uint32_t *out)
{
    char path[96];
    json_t *j = json_object_get(o, key);
    *out = dflt;
    if (j == NULL) {
        return true;
    }
    snprintf(path, sizeof path, "%s/%s", base, key);
    if (!json_is_integer(j) || json_integer_value(j) < 0 ||
        json_integer_value(j) > (json_int_t)UINT32_MAX - 1) {
        fail(d, path, "expected a non-negative integer");
        return false;
    }
    *out = (uint32_t)json_integer_value(j);
    return true;
}

/* A string member; required: absent is an error; else NULL. */
static bool get_string(dec *d, json_t *o, const char *key, const char *base, bool required,
                       const char **out)
{
    char path[96];
    json_t *j = json_object_get(o, key);
    snprintf(path, sizeof path, "%s/%s", base, key);
    *out = NULL;
    if (j == NULL) {
        if (required) {
            fail(d, path, "missing member \"%s\"", key);
            return false;
        }
        return true;
    }
    if (!json_is_string(j)) {
        fail(d, path, "expected a string");
        return false;
    }
    *out = dup_str(d, json_string_value(j));
    return *out != NULL;
}

static bool check_members(dec *d, json_t *o, const char *base, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a != NULL && !ok; a++) {
            ok = strcmp(*a, key) == 0;
        }
        if (!ok) {
            char path[160];
            snprintf(path, sizeof path, "%s/%.100s", base, key);
            fail(d, path, "unknown member \"%s\"", key);
            return false;
        }
    }
    return true;
}

static bool decode_vref(dec *d, json_t *j, const char *base, sp_vref *v)
{
    memset(v, 0, sizeof *v);
    if (j == NULL) {
        fail(d, base, "missing value reference");
        return false;
    }
    if (json_is_string(j)) {
        cm_error e;
        cm_error_clear(&e);
        if (sp_vref_parse_text(json_string_value(j), &d->l->arena, v, &e) != CM_OK) {
            if (e.code == CM_ENOMEM) {
                d->st = cm_error_set(d->err, CM_ENOMEM, NULL, "%s", e.msg);
                return false;
            }
            fail(d, base, "%s", e.msg);
            return false;
        }
        return true;
    }
    if (!json_is_object(j)) {
        fail(d, base,
             "expected a value reference: {\"input\": N}, {\"output\": N}, "
             "{\"op\": PATH, \"result\": N} or its text form");
        return false;
    }
    static const char *const allowed[] = {"input", "output", "op", "result", "function", NULL};
    if (!check_members(d, j, base, allowed)) {
        return false;
    }
    int n = (json_object_get(j, "input") != NULL) + (json_object_get(j, "output") != NULL) +
            (json_object_get(j, "op") != NULL);
    if (n != 1) {
        fail(d, base, "a value reference has exactly one of \"input\", \"output\", \"op\"");
        return false;
    }
    if (!get_string(d, j, "function", base, false, &v->function)) {
        return false;
    }
    if (json_object_get(j, "input") != NULL) {
        v->kind = SP_VREF_INPUT;
        return get_index(d, j, "input", base, 0, &v->index);
    }
    if (json_object_get(j, "output") != NULL) {
        v->kind = SP_VREF_OUTPUT;
        return get_index(d, j, "output", base, 0, &v->index);
    }
    v->kind = SP_VREF_OP;
    if (!get_string(d, j, "op", base, true, &v->op)) {
        return false;
    }
    if (v->op[0] != '/') {
        char path[96];
        snprintf(path, sizeof path, "%s/op", base);
        fail(d, path, "expected an op path such as \"/ops/5\", not \"%s\"", v->op);
        return false;
    }
    return get_index(d, j, "result", base, 0, &v->result);
}

static bool get_names(dec *d, json_t *o, const char *key, const char *base, const char ***out,
                      uint32_t *n_out)
{
    json_t *j = json_object_get(o, key);
    *out = NULL;
    *n_out = 0;
    if (j == NULL) {
        return true;
    }
    char path[96];
    snprintf(path, sizeof path, "%s/%s", base, key);
    if (!json_is_array(j) || json_array_size(j) > 256) {
        fail(d, path, "expected an array of at most 256 factor names");
        return false;
    }
    size_t n = json_array_size(j);
    const char **a = cm_arena_alloc(&d->l->arena, sizeof(char *) * (n + 1));
    if (a == NULL) {
        d->st = cm_error_set(d->err, CM_ENOMEM, NULL, "out of memory decoding edits");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(j, i);
        if (!json_is_string(x)) {
            char ip[144];
            snprintf(ip, sizeof ip, "%s/%zu", path, i);
            fail(d, ip, "expected a factor name");
            return false;
        }
        if ((a[i] = dup_str(d, json_string_value(x))) == NULL) {
            return false;
        }
    }
    *out = a;
    *n_out = (uint32_t)n;
    return true;
}

static bool decode_edit(dec *d, json_t *j)
{
    sp_edit e;
    memset(&e, 0, sizeof e);
    char base[32];
    snprintf(base, sizeof base, "/edits/%u", d->l->n);
    if (!json_is_object(j)) {
        fail(d, base, "expected an edit object with \"kind\"");
        return false;
    }
    const char *kind;
    if (!get_string(d, j, "kind", base, true, &kind)) {
        return false;
    }
    if (!sp_edit_kind_parse(kind, &e.kind)) {
        char path[48];
        snprintf(path, sizeof path, "%s/kind", base);
        fail(d, path,
             "unknown edit kind \"%s\" (constrain, unconstrain, set_sharding, barrier, "
             "unbarrier, rule, custom_rule)",
             kind);
        return false;
    }
    static const char *const a_value_sh[] = {"kind", "value", "sharding", NULL};
    static const char *const a_op[] = {"kind", "op", NULL};
    static const char *const a_barrier[] = {"kind", "value", "direction", NULL};
    static const char *const a_rule[] = {"kind", "op", "rule", "reduction", "need_replication",
                                         NULL};
    static const char *const a_custom[] = {"kind",      "target",           "rule",
                                           "reduction", "need_replication", NULL};
    char vpath[48];
    snprintf(vpath, sizeof vpath, "%s/value", base);
    switch (e.kind) {
    case SP_EDIT_CONSTRAIN:
    case SP_EDIT_SET_SHARDING: {
        if (!check_members(d, j, base, a_value_sh) ||
            !decode_vref(d, json_object_get(j, "value"), vpath, &e.value)) {
            return false;
        }
        json_t *s = json_object_get(j, "sharding");
        char spath[48];
        snprintf(spath, sizeof spath, "%s/sharding", base);
        if (s == NULL || (json_is_null(s) && e.kind == SP_EDIT_CONSTRAIN)) {
            fail(d, spath, "missing member \"sharding\"");
            return false;
        }
        if (!json_is_null(s) && !get_string(d, j, "sharding", base, true, &e.sharding)) {
            return false;
        }
        if (e.value.kind == SP_VREF_OUTPUT && e.kind == SP_EDIT_CONSTRAIN) {
            fail(d, vpath,
                 "an output can only take set_sharding; constrain the returned "
                 "value instead");
            return false;
        }
        break;
    }
    case SP_EDIT_UNCONSTRAIN:
    case SP_EDIT_UNBARRIER:
        if (!check_members(d, j, base, a_op) || !get_string(d, j, "op", base, true, &e.op)) {
            return false;
        }
        break;
    case SP_EDIT_BARRIER:
        if (!check_members(d, j, base, a_barrier) ||
            !decode_vref(d, json_object_get(j, "value"), vpath, &e.value) ||
            !get_string(d, j, "direction", base, false, &e.direction)) {
            return false;
        }
        if (e.direction == NULL) {
            e.direction = "BOTH";
        }
        if (strcmp(e.direction, "BOTH") != 0 && strcmp(e.direction, "FORWARD") != 0 &&
            strcmp(e.direction, "BACKWARD") != 0 && strcmp(e.direction, "NONE") != 0) {
            char path[48];
            snprintf(path, sizeof path, "%s/direction", base);
            fail(d, path, "expected BOTH, FORWARD, BACKWARD or NONE, not \"%s\"", e.direction);
            return false;
        }
        if (e.value.kind == SP_VREF_OUTPUT) {
            fail(d, vpath, "an output can only take set_sharding");
            return false;
        }
        break;
    case SP_EDIT_RULE:
    case SP_EDIT_CUSTOM_RULE:
        if (!check_members(d, j, base, e.kind == SP_EDIT_RULE ? a_rule : a_custom) ||
            !get_string(d, j, e.kind == SP_EDIT_RULE ? "op" : "target", base, true,
                        e.kind == SP_EDIT_RULE ? &e.op : &e.target) ||
            !get_string(d, j, "rule", base, true, &e.rule) ||
            !get_names(d, j, "reduction", base, &e.reduction, &e.n_reduction) ||
            !get_names(d, j, "need_replication", base, &e.need_replication,
                       &e.n_need_replication)) {
            return false;
        }
        if (json_object_get(j, "reduction") == NULL) {
            e.reduction = NULL;
        }
        break;
    default:
        return false;
    }
    return sp_edit_list_add(d->l, &e, d->err) == CM_OK;
}

static cm_status decode_edits(dec *d, json_t *root)
{
    json_t *arr = root;
    if (json_is_object(root) && json_object_get(root, "kind") == NULL) {
        arr = json_object_get(root, "edits");
        if (arr == NULL) {
            return fail(d, "/edits", "missing member \"edits\"");
        }
    }
    if (json_is_object(arr)) {
        decode_edit(d, arr);
        return d->st;
    }
    if (!json_is_array(arr)) {
        return fail(d, "/edits", "expected an array of edits");
    }
    if (json_array_size(arr) + d->l->n > 1000) {
        return fail(d, "/edits", "at most 1000 edits");
    }
    for (size_t i = 0; i < json_array_size(arr) && d->st == CM_OK; i++) {
        decode_edit(d, json_array_get(arr, i));
    }
    return d->st;
}

static json_t *load(const char *json, size_t len, cm_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        char where[64];
        snprintf(where, sizeof where, "%d:%d", je.line, je.column);
        cm_error_set(err, CM_EINVAL, where, "edits are not JSON: %s", je.text);
    }
    return root;
}

cm_status sp_edit_list_decode(sp_edit_list *l, const char *json, size_t len, cm_error *err)
{
    json_t *root = load(json, len, err); /* new reference */
    if (root == NULL) {
        return CM_EINVAL;
    }
    dec d = {l, err, CM_OK};
    cm_status st = decode_edits(&d, root);
    json_decref(root);
    return st;
}

cm_status sp_whatif_request_decode(const char *json, size_t len, sp_edit_list *l, bool *save,
                                   char *profile, size_t profile_len, cm_error *err)
{
    *save = false;
    if (profile_len > 0) {
        profile[0] = '\0';
    }
    json_t *root = load(json, len, err); /* new reference */
    if (root == NULL) {
        return CM_EINVAL;
    }
    dec d = {l, err, CM_OK};
    static const char *const allowed[] = {"edits", "save", "profile", NULL};
    if (!json_is_object(root)) {
        fail(&d, "", "expected {\"edits\": [...], \"save\": false, \"profile\": NAME}");
    } else if (check_members(&d, root, "", allowed)) {
        json_t *s = json_object_get(root, "save");
        json_t *p = json_object_get(root, "profile");
        if (s != NULL && !json_is_boolean(s)) {
            fail(&d, "/save", "expected true or false");
        } else if (p != NULL && !json_is_null(p) &&
                   (!json_is_string(p) || strlen(json_string_value(p)) >= profile_len)) {
            fail(&d, "/profile", "expected a profile name");
        } else {
            *save = s != NULL && json_is_true(s);
            if (p != NULL && json_is_string(p)) {
                snprintf(profile, profile_len, "%s", json_string_value(p));
            }
            decode_edits(&d, root);
        }
    }
    json_decref(root);
    return d.st;
}
