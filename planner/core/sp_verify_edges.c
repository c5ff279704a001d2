/* SPDX-License-Identifier: Apache-2.0
 * planner: the propagation-edge debug attributes as Shardy's verifier checks
 * them (verifiers.cc: PropagationEdgesAttr::verify and the
 * `sdy.propagation_edges` / `sdy.result_propagation_edges` /
 * `sdy.block_arg_propagation_edges` cases of the dialect attribute check).
 * The reader keeps `#sdy.propagation_edges<[{step-N = [{"a" = operand-0 ->
 * [result-0]}]}]>` as text; this file reads the text back: steps are
 * non-negative and unique, no target repeats or equals its source, the
 * values named reference some sharding on one mesh holding every axis, and
 * operand and result indices are in range (except on
 * sdy.func_data_flow_edge). */
#include "sp_verify_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_ops.h"

#define MAX_ITEMS 256

typedef struct edge_ref {
    bool result; /* result-N, else operand-N */
    int64_t index;
} edge_ref;

typedef struct edge_entry {
    int64_t step;
    uint32_t ord; /* which step of the list */
    char axis[64];
    edge_ref src;
    edge_ref tgt[16];
    uint32_t n_tgt;
} edge_entry;

typedef struct edge_rd {
    const char *p, *end;
} edge_rd;

static void skip_ws(edge_rd *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\t')) {
        r->p++;
    }
}

static bool lit(edge_rd *r, const char *s)
{
    skip_ws(r);
    size_t n = strlen(s);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, s, n) != 0) {
        return false;
    }
    r->p += n;
    return true;
}

static bool int_of(edge_rd *r, int64_t *v)
{
    skip_ws(r);
    const char *q = r->p;
    bool neg = q < r->end && *q == '-';
    q += neg;
    if (q >= r->end || *q < '0' || *q > '9') {
        return false;
    }
    int64_t x = 0;
    while (q < r->end && *q >= '0' && *q <= '9') {
        if (x > (INT64_MAX - 9) / 10) {
            return false;
        }
        x = x * 10 + (*q++ - '0');
    }
    *v = neg ? -x : x;
    r->p = q;
    return true;
}

static bool ref_of(edge_rd *r, edge_ref *e)
{
    if (lit(r, "operand-")) {
        e->result = false;
    } else if (lit(r, "result-")) {
        e->result = true;
    } else {
        return false;
    }
    return int_of(r, &e->index);
}

/* The axis ref `"a"` or `"a":(1)2`: the name into buf. */
static bool axis_of(edge_rd *r, char *buf, size_t cap)
{
    skip_ws(r);
    if (r->p >= r->end || *r->p != '"') {
        return false;
    }
    const char *q = ++r->p;
    while (r->p < r->end && *r->p != '"') {
        r->p++;
    }
    if (r->p >= r->end || (size_t)(r->p - q) >= cap) {
        return false;
    }
    memcpy(buf, q, (size_t)(r->p - q));
    buf[r->p - q] = '\0';
    r->p++;
    if (lit(r, ":")) {
        int64_t a, b;
        return lit(r, "(") && int_of(r, &a) && lit(r, ")") && int_of(r, &b);
    }
    return true;
}

/* Parses the text into entries; false when it is not a propagation edges
 * attribute. */
static bool parse_edges(const char *text, edge_entry *es, uint32_t *n_out)
{
    edge_rd r = {text, text + strlen(text)};
    uint32_t n = 0, ord = 0;
    if (!lit(&r, "#sdy.propagation_edges<") || !lit(&r, "[")) {
        return false;
    }
    if (lit(&r, "]")) {
        *n_out = 0;
        return lit(&r, ">");
    }
    do {
        int64_t step;
        if (!lit(&r, "{") || !lit(&r, "step-") || !int_of(&r, &step) || !lit(&r, "=") ||
            !lit(&r, "[")) {
            return false;
        }
        bool empty_step = lit(&r, "]");
        while (!empty_step) {
            if (n >= MAX_ITEMS) {
                return false;
            }
            edge_entry *e = &es[n];
            memset(e, 0, sizeof *e);
            e->step = step;
            e->ord = ord;
            if (!lit(&r, "{") || !axis_of(&r, e->axis, sizeof e->axis) || !lit(&r, "=") ||
                !ref_of(&r, &e->src) || !lit(&r, "->") || !lit(&r, "[")) {
                return false;
            }
            do {
                if (e->n_tgt >= 16 || !ref_of(&r, &e->tgt[e->n_tgt])) {
                    return false;
                }
                e->n_tgt++;
            } while (lit(&r, ","));
            if (!lit(&r, "]") || !lit(&r, "}")) {
                return false;
            }
            n++;
            if (!lit(&r, ",")) {
                break;
            }
        }
        if (!empty_step && !lit(&r, "]")) {
            return false;
        }
        if (!lit(&r, "}")) {
            return false;
        }
        if (empty_step && n < MAX_ITEMS) { /* keep the step for the index checks */
            memset(&es[n], 0, sizeof es[n]);
            es[n].step = step;
            es[n].ord = ord;
            es[n].axis[0] = '\0';
            n++;
        }
        ord++;
    } while (lit(&r, ","));
    *n_out = n;
    return lit(&r, "]") && lit(&r, ">");
}

static bool is_edges(const sp_attr *a)
{
    return a != NULL && a->kind == SP_ATTR_OPAQUE &&
           strncmp(a->u.opaque.text, "#sdy.propagation_edges<", 23) == 0;
}

/* PropagationEdgesAttr::verify; false with msg at the first finding. */
static bool edges_self_ok(const edge_entry *es, uint32_t n, char *msg, size_t cap)
{
    for (uint32_t i = 0; i < n; i++) {
        bool first_of_step = i == 0 || es[i - 1].ord != es[i].ord;
        if (first_of_step) {
            if (es[i].step < 0) {
                snprintf(msg, cap, "propagation edges have negative step index: %lld",
                         (long long)es[i].step);
                return false;
            }
            for (uint32_t j = 0; j < i; j++) {
                if (es[j].ord != es[i].ord && es[j].step == es[i].step) {
                    snprintf(msg, cap, "propagation edges have duplicate step index: %lld",
                             (long long)es[i].step);
                    return false;
                }
            }
        }
        for (uint32_t t = 0; t < es[i].n_tgt; t++) {
            const edge_ref *x = &es[i].tgt[t];
            if (x->result == es[i].src.result && x->index == es[i].src.index) {
                snprintf(msg, cap, "propagation edges have a source that is the same as a target");
                return false;
            }
            for (uint32_t u = 0; u < t; u++) {
                if (es[i].tgt[u].result == x->result && es[i].tgt[u].index == x->index) {
                    snprintf(msg, cap, "propagation edges have duplicate targets for step index: "
                             "%lld and axis: %s", (long long)es[i].step, es[i].axis);
                    return false;
                }
            }
        }
    }
    return true;
}

static const sp_sharding *ref_sharding(const sp_module *m, const sp_op *o, const edge_ref *r)
{
    if (r->index < 0) {
        return NULL;
    }
    if (r->result) {
        return (uint64_t)r->index < o->n_results
                   ? sp_value_sharding(m, o->first_result + (uint32_t)r->index)
                   : NULL;
    }
    return (uint64_t)r->index < o->n_operands ? sp_value_sharding(m, o->operands[r->index])
                                              : NULL;
}

static bool ref_in_range(sp_module *m, uint32_t op, const edge_ref *r, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    uint32_t lim = r->result ? o->n_results : o->n_operands;
    if (o->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE || (r->index >= 0 && r->index < (int64_t)lim)) {
        return true;
    }
    sp_diags_add(d, m, op, SP_DIAG_ERROR,
                 "'%s' op expected a value ref to have %s index in range [0, %u), got: %lld",
                 o->name, r->result ? "a result" : "an operand", lim, (long long)r->index);
    *bad = true;
    return false;
}

/* verifyPropagationEdgesShardingAttr for the sdy.propagation_edges of op. */
static void edges_op_ok(sp_module *m, uint32_t op, const edge_entry *es, uint32_t n,
                        sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    const sp_sharding *first = NULL;
    bool common = true;
    for (uint32_t i = 0; i < n; i++) {
        if (es[i].axis[0] == '\0') {
            continue;
        }
        const sp_sharding *s[17];
        uint32_t k = 0;
        s[k++] = ref_sharding(m, o, &es[i].src);
        for (uint32_t t = 0; t < es[i].n_tgt; t++) {
            s[k++] = ref_sharding(m, o, &es[i].tgt[t]);
        }
        for (uint32_t j = 0; j < k; j++) {
            if (s[j] == NULL) {
                continue;
            }
            if (first == NULL) {
                first = s[j];
            } else if (!((first->mesh_name != NULL && s[j]->mesh_name != NULL &&
                          strcmp(first->mesh_name, s[j]->mesh_name) == 0) ||
                         (first->mesh != NULL && s[j]->mesh != NULL &&
                          sp_mesh_equal(first->mesh, s[j]->mesh)))) {
                common = false;
            }
        }
    }
    if (first == NULL) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "'%s' op expected propagation edges attr to reference a sharding.", o->name);
        *bad = true;
        return;
    }
    const sp_mesh *mesh = first->mesh != NULL ? first->mesh
                                              : (first->mesh_name != NULL
                                                     ? sp_module_mesh(m, first->mesh_name)
                                                     : NULL);
    if (!common || mesh == NULL) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "'%s' op expected a common mesh for propagation edges attr.", o->name);
        *bad = true;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (es[i].axis[0] == '\0') {
            continue;
        }
        if (sp_mesh_axis_index(mesh, es[i].axis) < 0) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR,
                         "'%s' op expected axis ref to be in one of the meshes", o->name);
            *bad = true;
            return;
        }
        if (!ref_in_range(m, op, &es[i].src, d, bad)) {
            return;
        }
        for (uint32_t t = 0; t < es[i].n_tgt; t++) {
            if (!ref_in_range(m, op, &es[i].tgt[t], d, bad)) {
                return;
            }
        }
    }
}

/* Parses and self-checks one attribute; false when reported. */
static bool edges_attr_ok(sp_module *m, uint32_t op, const sp_attr *a, edge_entry *es,
                          uint32_t *n, sp_diags *d, bool *bad)
{
    char msg[256];
    if (!parse_edges(a->u.opaque.text, es, n)) {
        return true; /* beyond what this reader follows: left to the reader */
    }
    if (!edges_self_ok(es, *n, msg, sizeof msg)) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR, "%s", msg);
        *bad = true;
        return false;
    }
    return true;
}

static bool is_edges_name(const char *name, bool *single)
{
    /* every attribute of every op comes here twice: most are not sdy.* */
    if (!(name[0] == 's' && name[1] == 'd' && name[2] == 'y' && name[3] == '.')) {
        *single = false;
        return false;
    }
    *single = strcmp(name, "sdy.propagation_edges") == 0;
    return *single || strcmp(name, "sdy.result_propagation_edges") == 0 ||
           strcmp(name, "sdy.block_arg_propagation_edges") == 0;
}

bool sp_verify_propagation_edges_parsed(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    edge_entry *es = NULL;
    bool ok = true;
    for (uint32_t i = 0; i < o->n_attrs && ok; i++) {
        const sp_attr *a = o->attrs[i].value;
        bool single;
        if (!is_edges_name(o->attrs[i].name, &single)) {
            continue;
        }
        if (es == NULL && (es = cm_calloc(MAX_ITEMS, sizeof *es)) == NULL) {
            return true; /* the checks are skipped, not failed, without memory */
        }
        uint32_t n;
        if (is_edges(a)) {
            ok = edges_attr_ok(m, op, a, es, &n, d, bad);
        }
        for (uint32_t k = 0; ok && a->kind == SP_ATTR_ARRAY && k < a->u.arr.n; k++) {
            if (is_edges(a->u.arr.items[k])) {
                ok = edges_attr_ok(m, op, a->u.arr.items[k], es, &n, d, bad);
            }
        }
    }
    cm_free(es);
    return ok;
}

bool sp_verify_propagation_edges_attr(sp_module *m, uint32_t op, const char *name,
                                      const sp_attr *a, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    bool single, was = *bad;
    if (!is_edges_name(name, &single)) {
        return true;
    }
    if (single) {
        if (!is_edges(a)) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR,
                         "'%s' op should have a propagation edges attribute of type "
                         "PropagationEdgesAttr for attr named 'sdy.propagation_edges'",
                         o->name);
            *bad = true;
            return false;
        }
        edge_entry *es = cm_calloc(MAX_ITEMS, sizeof *es);
        uint32_t n;
        if (es != NULL && parse_edges(a->u.opaque.text, es, &n)) {
            *bad = false;
            edges_op_ok(m, op, es, n, d, bad);
            bool reported = *bad;
            *bad = *bad || was;
            cm_free(es);
            return !reported;
        }
        cm_free(es);
        return true;
    }
    bool ok = a->kind == SP_ATTR_ARRAY;
    for (uint32_t k = 0; ok && k < a->u.arr.n; k++) {
        ok = is_edges(a->u.arr.items[k]);
    }
    if (!ok) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "'%s' op should have a propagation edges attribute of type "
                     "ArrayAttr<PropagationEdgesAttr> for attr named "
                     "'sdy.result_propagation_edges' or 'sdy.block_arg_propagation_edges'",
                     o->name);
        *bad = true;
    }
    return ok;
}
