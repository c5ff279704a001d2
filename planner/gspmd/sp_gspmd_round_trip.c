/* SPDX-License-Identifier: Apache-2.0
 * planner: the sdy round trip's import (sp_gspmd.h), the form jax.export
 * artifacts and XLA dumps carry after Shardy ran: the meshes in the module's
 * `xla.sdy.meshes` frontend attribute, each sharding as the text of its sdy
 * attribute in an `xla.sdy.sharding` frontend attribute, func results
 * through @xla.sdy.FuncResultSharding custom calls. As XLA's
 * SdyRoundTripImportShardyAttrsPass (without HLO sharding V3): shardings of
 * arguments, results, @Sharding calls, python callbacks and send/recv/
 * after_all are restored; other ops' `xla.sdy.sharding` and every
 * `mhlo.sharding` are dropped (XLA's copies may have the wrong shape). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_gspmd.h"
#include "sp_gspmd_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define FRONTEND "mhlo.frontend_attributes"
#define SDY_KEY  "xla.sdy.sharding"
#define RULE_KEY "xla.sdy.sharding_rule"

/* ---- attribute helpers ------------------------------------------------------------ */

static sp_attr *list_item(const sp_attr *arr, uint32_t i)
{
    if (arr == NULL || arr->kind != SP_ATTR_ARRAY || i >= arr->u.arr.n) {
        return NULL;
    }
    return arr->u.arr.items[i];
}

static const char *dict_string(const sp_attr *d, const char *key)
{
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return NULL;
    }
    const sp_attr *v = sp_attrs_get(d->u.dict.items, d->u.dict.n, key);
    return v != NULL && v->kind == SP_ATTR_STRING ? v->u.str.s : NULL;
}

/* A copy of dictionary d without key (NULL when nothing is left). */
static sp_attr *dict_without(sp_module *m, const sp_attr *d, const char *key, bool *oom)
{
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return NULL;
    }
    sp_attr *r = sp_attr_new(m, SP_ATTR_DICT);
    sp_named_attr *items = cm_arena_alloc(&m->arena, sizeof *items * (d->u.dict.n + 1u));
    if (r == NULL || items == NULL) {
        *oom = true;
        return NULL;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->u.dict.n; i++) {
        if (strcmp(d->u.dict.items[i].name, key) != 0) {
            items[n++] = d->u.dict.items[i];
        }
    }
    if (n == 0) {
        return NULL;
    }
    r->u.dict.items = items;
    r->u.dict.n = n;
    return r;
}

/* A copy of the named attributes with drop removed and (add, v) put in name
 * order (v NULL: nothing added). */
static sp_named_attr *attrs_with(sp_module *m, const sp_named_attr *items, uint32_t n,
                                 const char *drop, const char *add, sp_attr *v, uint32_t *n_out)
{
    sp_named_attr *r = cm_arena_alloc(&m->arena, sizeof *r * (n + 2u));
    if (r == NULL) {
        return NULL;
    }
    uint32_t k = 0;
    bool added = v == NULL;
    for (uint32_t i = 0; i < n; i++) {
        if ((drop != NULL && strcmp(items[i].name, drop) == 0) ||
            (add != NULL && strcmp(items[i].name, add) == 0)) {
            continue;
        }
        if (!added && strcmp(items[i].name, add) > 0) {
            r[k++] = (sp_named_attr){add, v};
            added = true;
        }
        r[k++] = items[i];
    }
    if (!added) {
        r[k++] = (sp_named_attr){add, v};
    }
    *n_out = k;
    return r;
}

/* Sets, replaces or (v NULL) removes attribute name of op, in name order. */
static cm_status op_put(sp_module *m, uint32_t op, const char *name, sp_attr *v)
{
    uint32_t n = 0;
    sp_named_attr *r =
        attrs_with(m, m->ops[op].attrs, m->ops[op].n_attrs, name, v != NULL ? name : NULL, v, &n);
    if (r == NULL) {
        return CM_ENOMEM;
    }
    m->ops[op].attrs = r;
    m->ops[op].n_attrs = n;
    return CM_OK;
}

/* The same for entry i of a function's arg_attrs / res_attrs list. */
static cm_status list_put(sp_module *m, uint32_t f, const char *list, uint32_t count, uint32_t i,
                          const char *name, sp_attr *v)
{
    const sp_attr *old = sp_op_attr(m, f, list);
    sp_attr *arr = sp_attr_new(m, SP_ATTR_ARRAY), *d = sp_attr_new(m, SP_ATTR_DICT);
    if (arr == NULL || d == NULL) {
        return CM_ENOMEM;
    }
    arr->u.arr.items = cm_arena_alloc(&m->arena, sizeof(sp_attr *) * (count + 1u));
    if (arr->u.arr.items == NULL) {
        return CM_ENOMEM;
    }
    arr->u.arr.n = count;
    const sp_attr *od = list_item(old, i);
    bool is_dict = od != NULL && od->kind == SP_ATTR_DICT;
    d->u.dict.items = attrs_with(m, is_dict ? od->u.dict.items : NULL, is_dict ? od->u.dict.n : 0,
                                 name, v != NULL ? name : NULL, v, &d->u.dict.n);
    if (d->u.dict.items == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t k = 0; k < count; k++) {
        sp_attr *it = k == i ? d : list_item(old, k);
        if (it == NULL) {
            it = sp_attr_new(m, SP_ATTR_DICT);
            if (it == NULL) {
                return CM_ENOMEM;
            }
        }
        arr->u.arr.items[k] = it;
    }
    return sp_op_set_attr(m, f, list, arr);
}

static cm_status func_error(const sp_module *m, uint32_t f, cm_error *err, const char *what,
                            uint32_t i)
{
    char path[32];
    snprintf(path, sizeof path, "%u:%u", m->ops[f].line, m->ops[f].col);
    return cm_error_set(err, CM_EINVAL, path, "malformed xla.sdy.sharding of %s %u", what, i);
}

/* Parses `#sdy.sharding<...>`. */
static sp_sharding *parse_one(sp_module *m, const char *text)
{
    static const char head[] = "#sdy.sharding";
    if (strncmp(text, head, sizeof head - 1) != 0) {
        return NULL;
    }
    sp_sharding *s = NULL;
    cm_error e;
    size_t len = strlen(text) - (sizeof head - 1);
    if (sp_sharding_parse(text + sizeof head - 1, len, &m->arena, &s, NULL, &e) != CM_OK) {
        return NULL;
    }
    return s;
}

/* ---- detection and the meshes ------------------------------------------------------- */

bool sp_gspmd_detect_round_trip(const sp_module *m)
{
    const sp_attr *d = sp_attrs_get(m->attrs, m->n_attrs, FRONTEND);
    return dict_string(d, "xla.sdy.meshes") != NULL;
}

/* `{mesh = #sdy.mesh<[...]>, "other" = #sdy.mesh<[]>}` into sdy.mesh ops. */
static cm_status import_meshes(sp_module *m, const char *text, cm_error *err)
{
    size_t len = strlen(text), i = 0;
    uint32_t at = 0;
    while (i < len && (text[i] == ' ' || text[i] == '{')) {
        i++;
    }
    while (i < len && text[i] != '}') {
        size_t name_start = i, name_len;
        if (text[i] == '"') {
            name_start = ++i;
            while (i < len && text[i] != '"') {
                i++;
            }
            name_len = i - name_start;
            i++;
        } else {
            while (i < len && text[i] != ' ' && text[i] != '=') {
                i++;
            }
            name_len = i - name_start;
        }
        while (i < len && (text[i] == ' ' || text[i] == '=')) {
            i++;
        }
        /* the mesh is written as is, or (as newer XLA writes it) as a
         * string holding it: `mesh = "#sdy.mesh<\"a\"=8>"` */
        const char *mt = text + i;
        size_t mlen = len - i, quoted = 0;
        if (i < len && text[i] == '"') {
            char *u = cm_arena_alloc(&m->arena, len - i);
            if (u == NULL) {
                return cm_error_oom(err);
            }
            size_t k = i + 1, o = 0;
            while (k < len && text[k] != '"') {
                int hi, lo;
                if (text[k] == '\\' && k + 2 < len && (hi = cm_hex_digit(text[k + 1])) >= 0 &&
                    (lo = cm_hex_digit(text[k + 2])) >= 0) {
                    u[o++] = (char)(hi * 16 + lo); /* MLIR's `\22` */
                    k += 3;
                    continue;
                }
                if (text[k] == '\\' && k + 1 < len) {
                    k++;
                }
                u[o++] = text[k++];
            }
            if (k >= len) {
                return cm_error_set(err, CM_EINVAL, NULL,
                                    "malformed xla.sdy.meshes: unterminated string at byte %zu", i);
            }
            mt = u;
            mlen = o;
            quoted = k + 1 - i;
        }
        static const char head[] = "#sdy.mesh";
        if (name_len == 0 || mlen < sizeof head - 1 || strncmp(mt, head, sizeof head - 1) != 0) {
            return cm_error_set(err, CM_EINVAL, NULL, "malformed xla.sdy.meshes at byte %zu", i);
        }
        if (quoted > 0 && mlen > sizeof head && mt[sizeof head - 1] == '<' &&
            mt[sizeof head] == '"' && mt[mlen - 1] == '>') {
            /* Shardy's earlier mesh syntax, without the brackets:
             * `#sdy.mesh<"a"=8, "b"=8>` is `#sdy.mesh<["a"=8, "b"=8]>` */
            char *w = cm_arena_alloc(&m->arena, mlen + 2);
            if (w == NULL) {
                return cm_error_oom(err);
            }
            memcpy(w, mt, sizeof head);
            w[sizeof head] = '[';
            memcpy(w + sizeof head + 1, mt + sizeof head, mlen - sizeof head - 1);
            memcpy(w + mlen, "]>", 2);
            mt = w;
            mlen += 2;
        }
        sp_mesh *mesh;
        size_t used = 0;
        cm_error e;
        if (sp_mesh_parse(mt + sizeof head - 1, mlen - (sizeof head - 1), &m->arena, &mesh, &used,
                          &e) != CM_OK) {
            return e.code == CM_ENOMEM
                       ? cm_error_oom(err)
                       : cm_error_set(err, CM_EINVAL, NULL, "malformed mesh in xla.sdy.meshes: %s",
                                      e.msg);
        }
        if (quoted > 0 && used != mlen - (sizeof head - 1)) {
            return cm_error_set(err, CM_EINVAL, NULL,
                                "malformed xla.sdy.meshes: text after the mesh at byte %zu", i);
        }
        i += quoted > 0 ? quoted : sizeof head - 1 + used;
        uint32_t op;
        sp_attr *n = sp_attr_new(m, SP_ATTR_STRING), *ms = sp_attr_new(m, SP_ATTR_MESH);
        const char *s = sp_module_str(m, text + name_start, name_len);
        if (n == NULL || ms == NULL || s == NULL ||
            sp_module_new_op(m, SP_NONE, "sdy.mesh", NULL, 0, NULL, 0, &op) != CM_OK) {
            return cm_error_oom(err);
        }
        n->u.str.s = s;
        n->u.str.len = name_len;
        ms->u.mesh = mesh;
        if (sp_op_set_attr(m, op, "sym_name", n) != CM_OK ||
            sp_op_set_attr(m, op, "mesh", ms) != CM_OK ||
            sp_block_insert_op(m, m->body, at++, op) != CM_OK) {
            return cm_error_oom(err);
        }
        while (i < len && (text[i] == ',' || text[i] == ' ')) {
            i++;
        }
    }
    return CM_OK;
}

/* ---- functions ------------------------------------------------------------------------ */

typedef struct rt_ctx {
    uint32_t func;
    bool v3; /* enable-hlo-sharding-v3: shardings are V3 mhlo.sharding text */
    bool closed_constraints; /* a FuncResultSharding constraint keeps closed dims */
    cm_error *err;
    uint32_t *dead; /* ops to remove once the walk is done (it indexes blocks) */
    uint32_t n_dead, cap_dead;
} rt_ctx;

static const char *call_target(const sp_module *m, uint32_t op)
{
    const sp_attr *t = sp_op_attr(m, op, "call_target_name");
    if (t == NULL) {
        return NULL;
    }
    return t->kind == SP_ATTR_SYMBOL ? t->u.sym : t->kind == SP_ATTR_STRING ? t->u.str.s : NULL;
}

static void replace_value(sp_module *m, uint32_t from, uint32_t to)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        for (uint32_t k = 0; k < m->ops[i].n_operands; k++) {
            if (m->ops[i].operands[k] == from) {
                m->ops[i].operands[k] = to;
            }
        }
    }
}

/* The number of uses of value v by ops in blocks; *user the last user. */
static uint32_t value_uses(const sp_module *m, uint32_t v, uint32_t *user)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        for (uint32_t k = 0; m->ops[i].parent_block != SP_NONE && k < m->ops[i].n_operands; k++) {
            if (m->ops[i].operands[k] == v) {
                n++;
                *user = i;
            }
        }
    }
    return n;
}

static bool value_used(const sp_module *m, uint32_t v)
{
    uint32_t u;
    return value_uses(m, v, &u) > 0;
}

/* The @X64Combine custom call that alone reads both results of the
 * FuncResultSharding op (as XLA's X64 rewriter leaves it), or SP_NONE. */
static uint32_t x64_combine_user(const sp_module *m, uint32_t op)
{
    const sp_op *o = &m->ops[op];
    uint32_t a = SP_NONE, b = SP_NONE;
    if (o->n_results != 2 || value_uses(m, o->first_result, &a) != 1 ||
        value_uses(m, o->first_result + 1, &b) != 1 || a != b) {
        return SP_NONE;
    }
    const char *t = m->ops[a].kind == SP_OP_CUSTOM_CALL ? call_target(m, a) : NULL;
    return t != NULL && strcmp(t, "X64Combine") == 0 ? a : SP_NONE;
}

/* @xla.sdy.FuncResultSharding(x): its sharding goes to the func results it
 * returns as; other uses keep it as a constraint, with open dims (with the
 * sharding's own when c->closed_constraints). */
static cm_status func_result_sharding(sp_module *m, uint32_t op, sp_attr *shardings,
                                      rt_ctx *c)
{
    sp_op *o = &m->ops[op];
    uint32_t combine = x64_combine_user(m, op);
    if ((combine == SP_NONE && (o->n_operands != 1 || o->n_results != 1)) || shardings == NULL ||
        shardings->u.shardings.n < 1) {
        return sp_gspmd_op_error(m, op, c->err, "is a malformed xla.sdy.FuncResultSharding");
    }
    sp_sharding *s = shardings->u.shardings.items[0];
    uint32_t v = o->first_result;
    if (combine != SP_NONE) {
        /* XLA's X64 rewriter passed the two 32-bit halves through: the
         * sharding is the X64Combine's, and its uses are the ones to read */
        if (op_put(m, combine, "sdy.sharding", shardings) != CM_OK) {
            return cm_error_oom(c->err);
        }
        v = m->ops[combine].first_result;
    } else if (!value_used(m, v) && o->operands[0] < m->n_values &&
               m->values[o->operands[0]].def != SP_NONE) {
        /* unused (a zero-element result XLA replaced with a constant):
         * its operand's uses are the ones to read */
        v = o->operands[0];
    }
    bool other_uses = false;
    const sp_type *ft = sp_func_type(m, c->func);
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE || i == op) {
            continue;
        }
        for (uint32_t k = 0; k < m->ops[i].n_operands; k++) {
            if (m->ops[i].operands[k] != v) {
                continue;
            }
            if (m->ops[i].kind == SP_OP_FUNC_RETURN && ft != NULL && k < ft->n_results) {
                sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
                if (a == NULL) {
                    return cm_error_oom(c->err);
                }
                a->u.sharding = s;
                if (list_put(m, c->func, "res_attrs", ft->n_results, k, "sdy.sharding", a) !=
                    CM_OK) {
                    return cm_error_oom(c->err);
                }
            } else {
                other_uses = true;
            }
        }
    }
    if (other_uses && combine == SP_NONE && v == o->first_result) {
        sp_sharding *open = sp_sharding_clone(&m->arena, s);
        sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
        sp_named_attr *attrs = cm_arena_alloc(&m->arena, sizeof *attrs);
        if (open == NULL || a == NULL || attrs == NULL) {
            return cm_error_oom(c->err);
        }
        for (uint32_t d = 0; !c->closed_constraints && d < open->rank; d++) {
            open->dims[d].is_closed = false;
        }
        a->u.sharding = open;
        attrs[0] = (sp_named_attr){"sharding", a};
        o = &m->ops[op];
        o->name = "sdy.sharding_constraint";
        o->kind = (uint32_t)sp_op_kind_of(o->name, strlen(o->name));
        o->attrs = attrs;
        o->n_attrs = 1;
        return CM_OK;
    }
    for (uint32_t r = 0; r < m->ops[op].n_results && r < m->ops[op].n_operands; r++) {
        replace_value(m, m->ops[op].first_result + r, m->ops[op].operands[r]);
    }
    if (CM_GROW_U32(c->dead, c->cap_dead, c->n_dead + 1, NULL) != CM_OK) {
        return cm_error_oom(c->err);
    }
    c->dead[c->n_dead++] = op;
    return CM_OK;
}

static bool keeps_sharding(const sp_module *m, uint32_t op)
{
    const sp_op *o = &m->ops[op];
    const char *target = o->kind == SP_OP_CUSTOM_CALL ? call_target(m, op) : NULL;
    return o->kind == SP_OP_SEND || o->kind == SP_OP_RECV || o->kind == SP_OP_AFTER_ALL ||
           (target != NULL &&
            (strcmp(target, "Sharding") == 0 || strcmp(target, "X64Combine") == 0 ||
             strstr(target, "python_cpu_callback") || strstr(target, "python_gpu_callback") ||
             strstr(target, "xla_ffi_python")));
}

static cm_status import_op(sp_module *m, uint32_t op, void *vctx)
{
    rt_ctx *c = vctx;
    sp_op *o = &m->ops[op];
    /* V3 keeps the shardings of the ops that keep one in mhlo.sharding, for
     * the import below; the others go */
    if (o->kind != SP_OP_INFEED && o->kind != SP_OP_OUTFEED && !(c->v3 && keeps_sharding(m, op)) &&
        sp_op_attr(m, op, "mhlo.sharding") != NULL &&
        op_put(m, op, "mhlo.sharding", NULL) != CM_OK) {
        return cm_error_oom(c->err);
    }
    const sp_attr *fe = sp_op_attr(m, op, FRONTEND);
    if (fe == NULL || fe->kind != SP_ATTR_DICT) {
        return CM_OK;
    }
    const char *rule = dict_string(fe, RULE_KEY);
    if (rule != NULL) {
        static const char head[] = "#sdy.op_sharding_rule";
        sp_rule *r;
        cm_error e;
        if (strncmp(rule, head, sizeof head - 1) != 0 ||
            sp_rule_parse(rule + sizeof head - 1, strlen(rule) - (sizeof head - 1), &m->arena, &r,
                          NULL, &e) != CM_OK) {
            return sp_gspmd_op_error(m, op, c->err, "has a malformed xla.sdy.sharding_rule");
        }
        sp_attr *a = sp_attr_new(m, SP_ATTR_RULE);
        if (a == NULL) {
            return cm_error_oom(c->err);
        }
        a->u.rule = r;
        if (op_put(m, op, "sdy.sharding_rule", a) != CM_OK) {
            return cm_error_oom(c->err);
        }
    }
    const char *text = dict_string(fe, SDY_KEY);
    sp_attr *shardings = NULL;
    if (text != NULL) {
        cm_status st = sp_gspmd_parse_per_value(m, text, op, &shardings, c->err);
        if (st != CM_OK) {
            return st;
        }
    }
    if (c->v3) {
        /* V3 keeps the shardings in mhlo.sharding: only the rules come here */
        bool oom3 = false;
        sp_attr *rest3 = rule != NULL ? dict_without(m, fe, RULE_KEY, &oom3) : (sp_attr *)0;
        if (rule == NULL) {
            return CM_OK;
        }
        return oom3 || op_put(m, op, FRONTEND, rest3) != CM_OK ? cm_error_oom(c->err) : CM_OK;
    }
    const char *target = o->kind == SP_OP_CUSTOM_CALL ? call_target(m, op) : NULL;
    if (target != NULL && strcmp(target, "xla.sdy.FuncResultSharding") == 0) {
        return func_result_sharding(m, op, shardings, c);
    }
    bool keep = keeps_sharding(m, op);
    if (shardings != NULL && keep && op_put(m, op, "sdy.sharding", shardings) != CM_OK) {
        return cm_error_oom(c->err);
    }
    bool oom = false;
    sp_attr *rest = dict_without(m, sp_op_attr(m, op, FRONTEND), SDY_KEY, &oom);
    if (!oom && rule != NULL && rest != NULL) {
        rest = dict_without(m, rest, RULE_KEY, &oom);
    }
    if (oom || op_put(m, op, FRONTEND, rest) != CM_OK) {
        return cm_error_oom(c->err);
    }
    return CM_OK;
}

static cm_status import_func(sp_module *m, uint32_t f, bool v3, bool closed_constraints,
                             cm_error *err)
{
    const sp_type *ft = sp_func_type(m, f);
    if (ft == NULL) {
        return CM_OK;
    }
    for (uint32_t i = 0; !v3 && i < ft->n_inputs; i++) {
        const sp_attr *d = list_item(sp_op_attr(m, f, "arg_attrs"), i);
        const sp_attr *fe = d != NULL && d->kind == SP_ATTR_DICT
                                ? sp_attrs_get(d->u.dict.items, d->u.dict.n, FRONTEND)
                                : NULL;
        const char *text = dict_string(fe, SDY_KEY);
        if (text != NULL) {
            sp_sharding *s = parse_one(m, text);
            sp_attr *a = s != NULL ? sp_attr_new(m, SP_ATTR_SHARDING) : NULL;
            if (s == NULL) {
                return func_error(m, f, err, "argument", i);
            }
            if (a == NULL) {
                return cm_error_oom(err);
            }
            a->u.sharding = s;
            bool oom = false;
            sp_attr *rest = dict_without(m, fe, SDY_KEY, &oom);
            if (oom || list_put(m, f, "arg_attrs", ft->n_inputs, i, "sdy.sharding", a) != CM_OK ||
                list_put(m, f, "arg_attrs", ft->n_inputs, i, FRONTEND, rest) != CM_OK) {
                return cm_error_oom(err);
            }
        }
        if (d != NULL && d->kind == SP_ATTR_DICT &&
            sp_attrs_get(d->u.dict.items, d->u.dict.n, "mhlo.sharding") != NULL &&
            list_put(m, f, "arg_attrs", ft->n_inputs, i, "mhlo.sharding", NULL) != CM_OK) {
            return cm_error_oom(err);
        }
    }
    for (uint32_t i = 0; !v3 && i < ft->n_results; i++) {
        const sp_attr *d = list_item(sp_op_attr(m, f, "res_attrs"), i);
        if (d != NULL && d->kind == SP_ATTR_DICT &&
            sp_attrs_get(d->u.dict.items, d->u.dict.n, "mhlo.sharding") != NULL &&
            list_put(m, f, "res_attrs", ft->n_results, i, "mhlo.sharding", NULL) != CM_OK) {
            return cm_error_oom(err);
        }
    }
    if (m->ops[f].n_regions == 0 || m->ops[f].regions[0].n_blocks == 0) {
        return CM_OK;
    }
    rt_ctx c = {f, v3, closed_constraints, err, NULL, 0, 0};
    cm_status st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], import_op, &c);
    for (uint32_t i = 0; i < c.n_dead; i++) {
        uint32_t idx = sp_op_index_in_block(m, c.dead[i]);
        if (idx != SP_NONE) {
            sp_block_remove_op(m, m->ops[c.dead[i]].parent_block, idx);
        }
    }
    cm_free(c.dead);
    return st;
}

/* ---- the sdy custom calls ------------------------------------------------------------- */

/* @Sharding(x) with an sdy sharding becomes sdy.sharding_constraint, and
 * @xla.sdy.ShardingGroup(x) sdy.sharding_group, as XLA's
 * -xla-sdy-import-sdy-custom-calls. */
static cm_status custom_calls(sp_module *m, uint32_t op, void *vctx)
{
    cm_error *err = vctx;
    sp_op *o = &m->ops[op];
    const char *target = o->kind == SP_OP_CUSTOM_CALL ? call_target(m, op) : NULL;
    if (target == NULL) {
        return CM_OK;
    }
    if (strcmp(target, "Sharding") == 0 && o->n_operands == 1 && o->n_results == 1) {
        const sp_attr *a = sp_op_attr(m, op, "sdy.sharding");
        const char *text = a == NULL ? sp_gspmd_frontend(m, op, SDY_KEY) : NULL;
        if (text != NULL) {
            /* run alone (-xla-sdy-import-sdy-custom-calls), the sharding is
             * still the frontend attribute's text */
            sp_attr *parsed = NULL;
            cm_status st = sp_gspmd_parse_per_value(m, text, op, &parsed, err);
            if (st != CM_OK) {
                return st;
            }
            a = parsed;
        }
        if (a == NULL || a->kind != SP_ATTR_SHARDING_LIST || a->u.shardings.n != 1) {
            return CM_OK;
        }
        sp_attr *v = sp_attr_new(m, SP_ATTR_SHARDING);
        sp_named_attr *attrs = cm_arena_alloc(&m->arena, sizeof *attrs);
        if (v == NULL || attrs == NULL) {
            return cm_error_oom(err);
        }
        v->u.sharding = a->u.shardings.items[0];
        attrs[0] = (sp_named_attr){"sharding", v};
        o = &m->ops[op];
        o->name = "sdy.sharding_constraint";
        o->kind = (uint32_t)sp_op_kind_of(o->name, strlen(o->name));
        o->attrs = attrs;
        o->n_attrs = 1;
        return CM_OK;
    }
    if (strcmp(target, "xla.sdy.PropagationBarrier") == 0 && o->n_operands == 1 &&
        o->n_results == 1) {
        /* back to sdy.propagation_barrier (Shardy's direction enum value) */
        static const char *const dirs[] = {"NONE", "FORWARD", "BACKWARD", "BOTH"};
        const char *dir = sp_gspmd_frontend(m, op, "xla.sdy.allowed_direction");
        long k = dir != NULL ? strtol(dir, NULL, 10) : -1;
        if (k < 0 || k > 3) {
            return sp_gspmd_op_error(m, op, err, "has a malformed xla.sdy.allowed_direction");
        }
        sp_attr *v = sp_attr_new(m, SP_ATTR_ENUM);
        sp_named_attr *attrs = cm_arena_alloc(&m->arena, sizeof *attrs);
        if (v == NULL || attrs == NULL) {
            return cm_error_oom(err);
        }
        v->u.enm.dialect = "sdy";
        v->u.enm.kind = "propagation_direction";
        v->u.enm.value = dirs[k];
        attrs[0] = (sp_named_attr){"allowed_direction", v};
        o = &m->ops[op];
        o->name = "sdy.propagation_barrier";
        o->kind = (uint32_t)sp_op_kind_of(o->name, strlen(o->name));
        o->attrs = attrs;
        o->n_attrs = 1;
        return CM_OK;
    }
    if (strcmp(target, "xla.sdy.ShardingGroup") == 0) {
        const char *id = sp_gspmd_frontend(m, op, "xla.sdy.sharding_group_id");
        if (id == NULL) {
            return sp_gspmd_op_error(m, op, err, "expected CustomCallOp with a sharding group id.");
        }
        if (o->n_operands != 1) {
            return sp_gspmd_op_error(m, op, err, "expected one operand.");
        }
        for (uint32_t i = 0; i < m->n_ops; i++) {
            for (uint32_t k = 0; o->n_results > 0 && k < m->ops[i].n_operands; k++) {
                if (m->ops[i].parent_block != SP_NONE && m->ops[i].operands[k] == o->first_result) {
                    return sp_gspmd_op_error(m, op, err,
                                             "xla.sdy.ShardingGroup CustomCallOp should have no "
                                             "uses.");
                }
            }
        }
        sp_attr *g = sp_attr_new(m, SP_ATTR_INT);
        sp_named_attr *attrs = cm_arena_alloc(&m->arena, sizeof *attrs);
        if (g == NULL || attrs == NULL) {
            return cm_error_oom(err);
        }
        g->u.i.v = strtoll(id, NULL, 10);
        g->u.i.type = "i64";
        attrs[0] = (sp_named_attr){"group_id", g};
        o = &m->ops[op];
        o->name = "sdy.sharding_group";
        o->kind = (uint32_t)sp_op_kind_of(o->name, strlen(o->name));
        o->attrs = attrs;
        o->n_attrs = 1;
        o->n_results = 0;
    }
    return CM_OK;
}

cm_status sp_gspmd_import_sdy_custom_calls(sp_module *m, sp_diags *d, cm_error *err)
{
    cm_error local;
    cm_error *e = err != NULL ? err : &local;
    cm_status st = sp_gspmd_unescape_frontend(m, e);
    if (st == CM_OK) {
        st = sp_gspmd_walk_funcs(m, custom_calls, e);
    }
    uint32_t l = 0, c = 0;
    if (st == CM_EINVAL && d != NULL && sscanf(e->path, "%u:%u", &l, &c) == 2) {
        /* XLA converts these as a dialect conversion, which adds its own
         * error at the op that did not convert */
        for (uint32_t i = 0; i < m->n_ops; i++) {
            const sp_op *o = &m->ops[i];
            if (o->line == l && o->col == c && o->kind == SP_OP_CUSTOM_CALL) {
                sp_diags_add(d, m, i, SP_DIAG_ERROR,
                             "failed to legalize operation '%s' that was explicitly marked illegal",
                             o->name);
                sp_diags_add(d, m, i, SP_DIAG_ERROR, "%s", e->msg);
                break;
            }
        }
    }
    return st;
}

cm_status sp_gspmd_round_trip_import(sp_module *m, bool hlo_sharding_v3, sp_diags *d, cm_error *err)
{
    return sp_gspmd_round_trip_import_as(m, hlo_sharding_v3, false, d, err);
}

cm_status sp_gspmd_round_trip_import_as(sp_module *m, bool hlo_sharding_v3, bool closed_constraints,
                                        sp_diags *d, cm_error *err)
{
    cm_status st = sp_gspmd_unescape_frontend(m, err);
    if (st != CM_OK) {
        return st;
    }
    const sp_attr *fe = sp_attrs_get(m->attrs, m->n_attrs, FRONTEND);
    const char *meshes = dict_string(fe, "xla.sdy.meshes");
    if (meshes != NULL && !hlo_sharding_v3) {
        st = import_meshes(m, meshes, err);
        bool oom = false;
        sp_attr *rest = dict_without(m, fe, "xla.sdy.meshes", &oom);
        uint32_t n = 0;
        sp_named_attr *attrs = oom ? NULL
                                   : attrs_with(m, m->attrs, m->n_attrs, FRONTEND,
                                                rest != NULL ? FRONTEND : NULL, rest, &n);
        if (st == CM_OK && attrs == NULL) {
            st = cm_error_oom(err);
        }
        if (st == CM_OK) {
            m->attrs = attrs;
            m->n_attrs = n;
        }
    }
    const sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC) {
            st = import_func(m, f, hlo_sharding_v3, closed_constraints, err);
        }
        top = &m->blocks[m->body];
    }
    /* V3: the kept mhlo.sharding texts name their meshes; import them */
    if (st == CM_OK && hlo_sharding_v3) {
        st = sp_gspmd_import_shardings_in_order(m, err);
        top = &m->blocks[m->body];
    }
    if (st == CM_OK) {
        st = sp_gspmd_walk_funcs(m, custom_calls, err);
    }
    if (st == CM_OK) {
        st = sp_gspmd_shard_map_import(m, d, err);
    }
    if (st == CM_OK) {
        st = sp_gspmd_open_while_free_vars(m, err);
    }
    return st;
}

static cm_status import_constant(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    sp_op *o = &m->ops[op];
    if (o->kind == SP_OP_CONSTANT) {
        o->name = "sdy.constant";
        o->kind = (uint32_t)sp_op_kind_of(o->name, strlen(o->name));
    }
    return CM_OK;
}

cm_status sp_gspmd_import_constants(sp_module *m, cm_error *err)
{
    (void)err;
    const sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < top->n_ops; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
            m->ops[f].regions[0].n_blocks > 0) {
            (void)sp_pass_walk(m, m->ops[f].regions[0].blocks[0], import_constant, NULL);
        }
    }
    return CM_OK;
}

/* ---- -xla-sdy-open-while-free-vars-sharding ------------------------------------------ */

/* True when op lies inside the regions of anc (at any depth). */
static bool inside(const sp_module *m, uint32_t op, uint32_t anc)
{
    for (int depth = 0; depth < 256 && op != SP_NONE; depth++) {
        uint32_t b = m->ops[op].parent_block;
        if (b == SP_NONE) {
            return false;
        }
        op = m->blocks[b].parent_op;
        if (op == anc) {
            return true;
        }
    }
    return false;
}

/* True when value v is defined inside anc's regions. */
static bool defined_inside(const sp_module *m, uint32_t v, uint32_t anc)
{
    const sp_value *val = &m->values[v];
    if (val->def != SP_NONE) {
        return inside(m, val->def, anc);
    }
    uint32_t owner = m->blocks[val->block].parent_op;
    return owner == anc || (owner != SP_NONE && inside(m, owner, anc));
}

typedef struct free_ctx {
    uint32_t w;
    uint32_t *vars;
    uint32_t n, cap;
    bool oom;
} free_ctx;

static cm_status collect_free(sp_module *m, uint32_t op, void *vctx)
{
    free_ctx *c = vctx;
    for (uint32_t k = 0; k < m->ops[op].n_operands; k++) {
        uint32_t v = m->ops[op].operands[k];
        if (defined_inside(m, v, c->w)) {
            continue;
        }
        bool seen = false;
        for (uint32_t i = 0; i < c->n && !seen; i++) {
            seen = c->vars[i] == v;
        }
        if (!seen) {
            if (CM_GROW_U32(c->vars, c->cap, c->n + 1, NULL) != CM_OK) {
                c->oom = true;
                return CM_ENOMEM;
            }
            c->vars[c->n++] = v;
        }
    }
    return CM_OK;
}

static bool fully_open(const sp_sharding *s)
{
    if (s->n_replicated > 0 || s->n_unreduced > 0) {
        return false;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].n_axes > 0 || s->dims[d].is_closed) {
            return false;
        }
    }
    return true;
}

/* One while op: a fully open constraint before it for each free variable
 * with a sharding, used in its regions instead. */
static cm_status open_while(sp_module *m, uint32_t w, cm_error *err)
{
    free_ctx c = {w, NULL, 0, 0, false};
    cm_status st = CM_OK;
    for (uint32_t r = 0; r < m->ops[w].n_regions && st == CM_OK; r++) {
        for (uint32_t k = 0; k < m->ops[w].regions[r].n_blocks && st == CM_OK; k++) {
            st = sp_pass_walk(m, m->ops[w].regions[r].blocks[k], collect_free, &c);
        }
    }
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        uint32_t v = c.vars[i];
        const sp_sharding *s = sp_value_sharding(m, v);
        if (s == NULL || s->rank == 0 || fully_open(s)) {
            continue;
        }
        sp_sharding *open = sp_sharding_open(&m->arena, s->mesh_name, s->rank);
        sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
        uint32_t op, type = m->values[v].type;
        if (open == NULL || a == NULL ||
            sp_module_new_op(m, SP_NONE, "sdy.sharding_constraint", &v, 1, &type, 1, &op) !=
                CM_OK) {
            st = CM_ENOMEM;
            break;
        }
        open->mesh = s->mesh;
        a->u.sharding = open;
        if (sp_op_set_attr(m, op, "sharding", a) != CM_OK ||
            sp_block_insert_op(m, m->ops[w].parent_block, sp_op_index_in_block(m, w), op) !=
                CM_OK) {
            st = CM_ENOMEM;
            break;
        }
        uint32_t nv = m->ops[op].first_result;
        for (uint32_t o = 0; o < m->n_ops; o++) {
            if (m->ops[o].parent_block == SP_NONE || !inside(m, o, w)) {
                continue;
            }
            for (uint32_t k = 0; k < m->ops[o].n_operands; k++) {
                if (m->ops[o].operands[k] == v) {
                    m->ops[o].operands[k] = nv;
                }
            }
        }
    }
    cm_free(c.vars);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}

typedef struct whiles {
    uint32_t *v;
    uint32_t n, cap;
} whiles;

static cm_status collect_while(sp_module *m, uint32_t op, void *vctx)
{
    whiles *w = vctx;
    if (m->ops[op].kind != SP_OP_WHILE) {
        return CM_OK;
    }
    if (CM_GROW_U32(w->v, w->cap, w->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    w->v[w->n++] = op;
    return CM_OK;
}

cm_status sp_gspmd_open_while_free_vars(sp_module *m, cm_error *err)
{
    whiles w = {NULL, 0, 0};
    cm_status st = CM_OK;
    const sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
            m->ops[f].regions[0].n_blocks > 0) {
            st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], collect_while, &w);
        }
    }
    if (st != CM_OK) {
        cm_free(w.v);
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < w.n && st == CM_OK; i++) {
        st = open_while(m, w.v[i], err);
    }
    cm_free(w.v);
    return st;
}
