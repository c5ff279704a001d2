/* SPDX-License-Identifier: Apache-2.0
 * planner: the sdy round trip's export (XLA's -xla-sdy-round-trip-export-
 * pipeline: export-ops, shard-map export, export-shardy-attrs, then the
 * StableHLO sharding export), a model of what XLA's StableHLO -> HLO ->
 * StableHLO conversion keeps of a module, and the testing pipeline that runs
 * the three (-xla-sdy-round-trip-testing-pipeline). Everything lives in the
 * module's arena. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_gspmd.h"
#include "sp_gspmd_int.h"
#include "sp_import.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define FRONTEND "mhlo.frontend_attributes"

/* ---- small helpers ---------------------------------------------------------------- */

static sp_attr *str_attr(sp_module *m, const char *s, size_t len)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_STRING);
    if (a == NULL) {
        return NULL;
    }
    a->u.str.s = sp_module_str(m, s, len);
    a->u.str.len = len;
    return a->u.str.s != NULL ? a : NULL;
}

/* The text of b with `"`, `'` and `\` escaped by a backslash, as XLA stores
 * an attribute it prints into a frontend attribute (absl::CEscape). */
static sp_attr *escaped_attr(sp_module *m, cm_buf *b)
{
    if (b->oom) {
        return NULL;
    }
    cm_buf e;
    cm_buf_init(&e);
    for (size_t i = 0; i < b->len; i++) {
        char c = b->data[i];
        if (c == '"' || c == '\'' || c == '\\') {
            cm_buf_putc(&e, '\\');
        }
        cm_buf_putc(&e, c);
    }
    sp_attr *a = e.oom ? NULL : str_attr(m, e.data, e.len);
    cm_buf_fini(&e);
    return a;
}

/* A copy of named attributes with (name, v) set in name order (v NULL:
 * removed). */
static sp_named_attr *with_attr(sp_module *m, const sp_named_attr *items, uint32_t n,
                                const char *name, sp_attr *v, uint32_t *n_out)
{
    sp_named_attr *r = cm_arena_alloc(&m->arena, sizeof *r * (n + 1u));
    if (r == NULL) {
        return NULL;
    }
    uint32_t k = 0;
    bool added = v == NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(items[i].name, name) == 0) {
            continue;
        }
        if (!added && strcmp(items[i].name, name) > 0) {
            r[k++] = (sp_named_attr){name, v};
            added = true;
        }
        r[k++] = items[i];
    }
    if (!added) {
        r[k++] = (sp_named_attr){name, v};
    }
    *n_out = k;
    return r;
}

/* Frontend dictionary d (may be NULL) with key set to v. */
static sp_attr *frontend_with(sp_module *m, const sp_attr *d, const char *key, sp_attr *v)
{
    sp_attr *r = sp_attr_new(m, SP_ATTR_DICT);
    if (r == NULL || v == NULL) {
        return NULL;
    }
    bool is_dict = d != NULL && d->kind == SP_ATTR_DICT;
    r->u.dict.items = with_attr(m, is_dict ? d->u.dict.items : NULL, is_dict ? d->u.dict.n : 0,
                                key, v, &r->u.dict.n);
    return r->u.dict.items != NULL ? r : NULL;
}

static cm_status op_put(sp_module *m, uint32_t op, const char *name, sp_attr *v)
{
    uint32_t n = 0;
    sp_named_attr *r = with_attr(m, m->ops[op].attrs, m->ops[op].n_attrs, name, v, &n);
    if (r == NULL) {
        return CM_ENOMEM;
    }
    m->ops[op].attrs = r;
    m->ops[op].n_attrs = n;
    return CM_OK;
}

static cm_status op_frontend(sp_module *m, uint32_t op, const char *key, sp_attr *v)
{
    sp_attr *fe = frontend_with(m, sp_op_attr(m, op, FRONTEND), key, v);
    return fe == NULL ? CM_ENOMEM : op_put(m, op, FRONTEND, fe);
}

static void set_name(sp_module *m, uint32_t op, const char *name)
{
    m->ops[op].name = name;
    m->ops[op].kind = (uint32_t)sp_op_kind_of(name, strlen(name));
}

static sp_attr *per_value(sp_module *m, const sp_attr *list)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "#sdy.sharding_per_value<[");
    for (uint32_t i = 0; i < list->u.shardings.n; i++) {
        cm_buf_puts(&b, i > 0 ? ", " : "");
        sp_sharding_print(list->u.shardings.items[i], &b);
    }
    cm_buf_puts(&b, "]>");
    sp_attr *a = escaped_attr(m, &b);
    cm_buf_fini(&b);
    return a;
}

static sp_attr *one_list(sp_module *m, sp_sharding *s)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items);
    if (a == NULL || items == NULL) {
        return NULL;
    }
    items[0] = s;
    a->u.shardings.items = items;
    a->u.shardings.n = 1;
    return a;
}

/* ---- -xla-sdy-round-trip-export-ops ----------------------------------------------- */

static cm_status export_op(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    sp_op *o = &m->ops[op];
    if (strcmp(o->name, "sdy.constant") == 0) {
        set_name(m, op, "stablehlo.constant");
        return CM_OK;
    }
    if (strcmp(o->name, "sdy.sharding_constraint") == 0) {
        /* @Sharding with the sharding as sdy.sharding, other attributes kept */
        const sp_attr *s = sp_op_attr(m, op, "sharding");
        sp_attr *list = s != NULL && s->kind == SP_ATTR_SHARDING ? one_list(m, s->u.sharding) : NULL;
        sp_attr *t = str_attr(m, "Sharding", 8);
        if (list == NULL || t == NULL) {
            return CM_ENOMEM;
        }
        (void)sp_op_remove_attr(m, op, "sharding");
        set_name(m, op, "stablehlo.custom_call");
        if (op_put(m, op, "call_target_name", t) != CM_OK ||
            op_put(m, op, "sdy.sharding", list) != CM_OK) {
            return CM_ENOMEM;
        }
        return CM_OK;
    }
    bool group = strcmp(o->name, "sdy.sharding_group") == 0;
    bool barrier = strcmp(o->name, "sdy.propagation_barrier") == 0;
    if (!group && !barrier) {
        return CM_OK;
    }
    char text[64];
    if (group) {
        const sp_attr *g = sp_op_attr(m, op, "group_id");
        snprintf(text, sizeof text, "%lld : i64",
                 g != NULL && g->kind == SP_ATTR_INT ? (long long)g->u.i.v : 0LL);
    } else {
        /* Shardy's PropagationDirection: NONE, FORWARD, BACKWARD, BOTH */
        static const char *const dirs[] = {"NONE", "FORWARD", "BACKWARD", "BOTH"};
        const sp_attr *d = sp_op_attr(m, op, "allowed_direction");
        const char *v = d != NULL && d->kind == SP_ATTR_ENUM ? d->u.enm.value : "BOTH";
        int k = 3;
        for (int i = 0; i < 4; i++) {
            if (strcmp(v, dirs[i]) == 0) {
                k = i;
            }
        }
        snprintf(text, sizeof text, "%d : i32", k);
    }
    const char *target = group ? "xla.sdy.ShardingGroup" : "xla.sdy.PropagationBarrier";
    sp_attr *t = str_attr(m, target, strlen(target));
    sp_attr *v = str_attr(m, text, strlen(text));
    sp_attr *se = sp_attr_new(m, SP_ATTR_BOOL);
    sp_attr *fe = sp_attr_new(m, SP_ATTR_DICT);
    sp_named_attr *items = cm_arena_alloc(&m->arena, sizeof *items);
    if (t == NULL || v == NULL || se == NULL || fe == NULL || items == NULL) {
        return CM_ENOMEM;
    }
    items[0] = (sp_named_attr){group ? "xla.sdy.sharding_group_id" : "xla.sdy.allowed_direction",
                               v};
    fe->u.dict.items = items;
    fe->u.dict.n = 1;
    se->u.b = true;
    o = &m->ops[op];
    o->attrs = NULL;
    o->n_attrs = 0;
    set_name(m, op, "stablehlo.custom_call");
    if (op_put(m, op, "call_target_name", t) != CM_OK ||
        (group && op_put(m, op, "has_side_effect", se) != CM_OK) ||
        op_put(m, op, FRONTEND, fe) != CM_OK) {
        return CM_ENOMEM;
    }
    return CM_OK;
}

/* ---- -xla-sdy-round-trip-export-shardy-attrs -------------------------------------- */

static sp_attr *list_item(const sp_attr *arr, uint32_t i)
{
    return arr != NULL && arr->kind == SP_ATTR_ARRAY && i < arr->u.arr.n ? arr->u.arr.items[i]
                                                                          : NULL;
}

static sp_sharding *entry_sharding(const sp_attr *d)
{
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return NULL;
    }
    const sp_attr *s = sp_attrs_get(d->u.dict.items, d->u.dict.n, "sdy.sharding");
    return s != NULL && s->kind == SP_ATTR_SHARDING ? s->u.sharding : NULL;
}

static cm_status attrs_op(sp_module *m, uint32_t op, void *ctx)
{
    bool v3 = *(const bool *)ctx;
    const sp_attr *s = sp_op_attr(m, op, "sdy.sharding");
    if (!v3 && s != NULL && s->kind == SP_ATTR_SHARDING_LIST) {
        sp_attr *t = per_value(m, s);
        if (t == NULL || op_frontend(m, op, "xla.sdy.sharding", t) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    const sp_attr *r = sp_op_attr(m, op, "sdy.sharding_rule");
    if (r != NULL && r->kind == SP_ATTR_RULE) {
        cm_buf b;
        cm_buf_init(&b);
        cm_buf_puts(&b, "#sdy.op_sharding_rule");
        sp_rule_print(r->u.rule, &b);
        sp_attr *t = escaped_attr(m, &b);
        cm_buf_fini(&b);
        if (t == NULL || op_frontend(m, op, "xla.sdy.sharding_rule", t) != CM_OK) {
            return CM_ENOMEM;
        }
        (void)sp_op_remove_attr(m, op, "sdy.sharding_rule");
    }
    return CM_OK;
}

/* Each func result with a sharding returns through a side-effecting
 * @xla.sdy.FuncResultSharding call that carries it: HLO keeps no frontend
 * attributes on results. */
static cm_status result_calls(sp_module *m, uint32_t f)
{
    const sp_type *ft = sp_func_type(m, f);
    if (ft == NULL || m->ops[f].n_regions == 0 || m->ops[f].regions[0].n_blocks == 0) {
        return CM_OK;
    }
    uint32_t blk = m->ops[f].regions[0].blocks[0];
    if (m->blocks[blk].n_ops == 0) {
        return CM_OK;
    }
    uint32_t ret = m->blocks[blk].ops[m->blocks[blk].n_ops - 1];
    const sp_attr *res = sp_op_attr(m, f, "res_attrs");
    for (uint32_t i = 0; i < m->ops[ret].n_operands && i < ft->n_results; i++) {
        sp_sharding *s = entry_sharding(list_item(res, i));
        if (s == NULL) {
            continue;
        }
        uint32_t v = m->ops[ret].operands[i], type = m->values[v].type, call;
        sp_attr *list = one_list(m, s);
        sp_attr *t = str_attr(m, "xla.sdy.FuncResultSharding", 26);
        sp_attr *se = sp_attr_new(m, SP_ATTR_BOOL);
        if (list == NULL || t == NULL || se == NULL ||
            sp_module_new_op(m, SP_NONE, "stablehlo.custom_call", &v, 1, &type, 1, &call) !=
                CM_OK) {
            return CM_ENOMEM;
        }
        se->u.b = true;
        sp_attr *text = per_value(m, list);
        if (text == NULL || op_put(m, call, "call_target_name", t) != CM_OK ||
            op_put(m, call, "has_side_effect", se) != CM_OK ||
            op_frontend(m, call, "xla.sdy.sharding", text) != CM_OK ||
            sp_block_insert_op(m, blk, sp_op_index_in_block(m, ret), call) != CM_OK) {
            return CM_ENOMEM;
        }
        m->ops[ret].operands[i] = m->ops[call].first_result;
    }
    return CM_OK;
}

static cm_status export_func_args(sp_module *m, uint32_t f)
{
    const sp_type *ft = sp_func_type(m, f);
    for (uint32_t i = 0; ft != NULL && i < ft->n_inputs; i++) {
        const sp_attr *d = list_item(sp_op_attr(m, f, "arg_attrs"), i);
        const sp_sharding *s = entry_sharding(d);
        if (s == NULL) {
            continue;
        }
        cm_buf b;
        cm_buf_init(&b);
        cm_buf_puts(&b, "#sdy.sharding");
        sp_sharding_print(s, &b);
        sp_attr *t = escaped_attr(m, &b);
        cm_buf_fini(&b);
        const sp_attr *old = sp_attrs_get(d->u.dict.items, d->u.dict.n, FRONTEND);
        sp_attr *fe = t != NULL ? frontend_with(m, old, "xla.sdy.sharding", t) : NULL;
        if (fe == NULL || sp_func_set_arg_attr(m, f, i, FRONTEND, fe) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

static bool needs_quotes(const char *s)
{
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) {
        return true;
    }
    for (const char *p = s; *p != '\0'; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '$' || c == '.')) {
            return true;
        }
    }
    return false;
}

static cm_status export_meshes(sp_module *m)
{
    cm_buf b;
    cm_buf_init(&b);
    uint32_t n = 0;
    const sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < top->n_ops; i++) {
        uint32_t op = top->ops[i];
        if (m->ops[op].kind != SP_OP_SDY_MESH) {
            continue;
        }
        const sp_attr *name = sp_op_attr(m, op, "sym_name");
        const sp_attr *mesh = sp_op_attr(m, op, "mesh");
        if (name == NULL || name->kind != SP_ATTR_STRING || mesh == NULL ||
            mesh->kind != SP_ATTR_MESH) {
            continue;
        }
        cm_buf_puts(&b, n++ == 0 ? "{" : ", ");
        if (needs_quotes(name->u.str.s)) {
            cm_buf_printf(&b, "\"%s\"", name->u.str.s);
        } else {
            cm_buf_puts(&b, name->u.str.s);
        }
        cm_buf_puts(&b, " = #sdy.mesh");
        sp_mesh_print(mesh->u.mesh, &b);
    }
    cm_status st = CM_OK;
    if (n > 0) {
        cm_buf_putc(&b, '}');
        sp_attr *t = escaped_attr(m, &b);
        sp_attr *fe = t != NULL
                          ? frontend_with(m, sp_attrs_get(m->attrs, m->n_attrs, FRONTEND),
                                          "xla.sdy.meshes", t)
                          : NULL;
        uint32_t na = 0;
        sp_named_attr *attrs = fe != NULL ? with_attr(m, m->attrs, m->n_attrs, FRONTEND, fe, &na)
                                          : NULL;
        if (attrs == NULL) {
            st = CM_ENOMEM;
        } else {
            m->attrs = attrs;
            m->n_attrs = na;
        }
    }
    cm_buf_fini(&b);
    return st;
}

cm_status sp_gspmd_round_trip_export_attrs(sp_module *m, bool hlo_sharding_v3, cm_error *err)
{
    const sp_block *top = &m->blocks[m->body];
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind != SP_OP_FUNC_FUNC) {
            continue;
        }
        if (!hlo_sharding_v3) {
            st = export_func_args(m, f);
            if (st == CM_OK) {
                st = result_calls(m, f);
            }
        }
        if (st == CM_OK && m->ops[f].n_regions > 0 && m->ops[f].regions[0].n_blocks > 0) {
            st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], attrs_op, &hlo_sharding_v3);
        }
        top = &m->blocks[m->body];
    }
    if (st == CM_OK && !hlo_sharding_v3) {
        st = export_meshes(m);
    }
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}

cm_status sp_gspmd_round_trip_export_ops(sp_module *m, cm_error *err)
{
    cm_status st = sp_gspmd_walk_funcs(m, export_op, NULL);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}

cm_status sp_gspmd_round_trip_export_pipeline(sp_module *m, bool keep_meshes_inlined,
                                              bool hlo_sharding_v3, cm_error *err)
{
    cm_status st = keep_meshes_inlined ? CM_OK : sp_pass_lift_inlined_meshes(m, err);
    if (st == CM_OK) {
        st = sp_gspmd_round_trip_export_ops(m, err);
    }
    if (st == CM_OK) {
        st = sp_gspmd_shard_map_export(m, err);
    }
    if (st == CM_OK) {
        st = sp_gspmd_round_trip_export_attrs(m, hlo_sharding_v3, err);
    }
    if (st == CM_OK) {
        sp_gspmd_export_opts o = {hlo_sharding_v3, false, false};
        st = sp_gspmd_export(m, &o, err);
    }
    return st;
}

/* ---- the StableHLO -> HLO -> StableHLO conversion ----------------------------------- */

/* True for the attributes an HLO instruction or parameter carries back:
 * the inherent (undotted) ones, its sharding and frontend attributes. */
static bool hlo_keeps(const char *name, bool result)
{
    if (strchr(name, '.') == NULL) {
        return true;
    }
    return strcmp(name, "mhlo.sharding") == 0 || (!result && strcmp(name, FRONTEND) == 0) ||
           strcmp(name, "mhlo.layout_mode") == 0 || strcmp(name, "mhlo.memory_kind") == 0;
}

static sp_attr *filter_dict(sp_module *m, const sp_attr *d, bool result)
{
    sp_attr *r = sp_attr_new(m, SP_ATTR_DICT);
    if (r == NULL) {
        return NULL;
    }
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return r;
    }
    r->u.dict.items = cm_arena_alloc(&m->arena, sizeof *r->u.dict.items * (d->u.dict.n + 1u));
    if (r->u.dict.items == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < d->u.dict.n; i++) {
        if (hlo_keeps(d->u.dict.items[i].name, result)) {
            r->u.dict.items[r->u.dict.n++] = d->u.dict.items[i];
        }
    }
    return r;
}

static cm_status filter_list(sp_module *m, uint32_t f, const char *key, bool result)
{
    const sp_attr *old = sp_op_attr(m, f, key);
    if (old == NULL || old->kind != SP_ATTR_ARRAY) {
        return CM_OK;
    }
    sp_attr *arr = sp_attr_new(m, SP_ATTR_ARRAY);
    if (arr == NULL) {
        return CM_ENOMEM;
    }
    arr->u.arr.items = cm_arena_alloc(&m->arena, sizeof(sp_attr *) * (old->u.arr.n + 1u));
    if (arr->u.arr.items == NULL) {
        return CM_ENOMEM;
    }
    arr->u.arr.n = old->u.arr.n;
    for (uint32_t i = 0; i < old->u.arr.n; i++) {
        arr->u.arr.items[i] = filter_dict(m, old->u.arr.items[i], result);
        if (arr->u.arr.items[i] == NULL) {
            return CM_ENOMEM;
        }
    }
    return sp_op_set_attr(m, f, key, arr);
}

/* XLA's HLO shape text of one tensor type with the default layout:
 * `f32[8,16]{1,0}`. */
static void hlo_shape(const sp_type *t, cm_buf *b)
{
    const char *e = sp_elem_name(t->elem);
    static const char *const map[][2] = {{"i1", "pred"},  {"i8", "s8"},   {"i16", "s16"},
                                         {"i32", "s32"},  {"i64", "s64"}, {"ui8", "u8"},
                                         {"ui16", "u16"}, {"ui32", "u32"}, {"ui64", "u64"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(e, map[i][0]) == 0) {
            e = map[i][1];
        }
    }
    cm_buf_printf(b, "%s[", e);
    for (uint32_t d = 0; d < t->rank; d++) {
        cm_buf_printf(b, "%s%lld", d > 0 ? "," : "", (long long)t->dims[d]);
    }
    cm_buf_putc(b, ']');
    if (t->rank > 0) {
        cm_buf_putc(b, '{');
        for (uint32_t d = t->rank; d-- > 0;) {
            cm_buf_printf(b, "%u%s", d, d > 0 ? "," : "");
        }
        cm_buf_putc(b, '}');
    }
}

static cm_status hlo_op(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    sp_op *o = &m->ops[op];
    /* discardable attributes other than the sharding and frontend attributes go */
    uint32_t k = 0;
    for (uint32_t i = 0; i < o->n_attrs; i++) {
        if (hlo_keeps(o->attrs[i].name, false)) {
            o->attrs[k++] = o->attrs[i];
        }
    }
    o->n_attrs = k;
    if (o->kind != SP_OP_CUSTOM_CALL) {
        return CM_OK;
    }
    /* an HLO custom call always has a backend config; several results are
     * one tuple, whose shape the import records */
    if (sp_op_attr(m, op, "backend_config") == NULL) {
        sp_attr *bc = str_attr(m, "", 0);
        if (bc == NULL || op_put(m, op, "backend_config", bc) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    o = &m->ops[op];
    if (o->n_results > 1 && sp_op_attr(m, op, "xla_shape") == NULL) {
        cm_buf b;
        cm_buf_init(&b);
        cm_buf_putc(&b, '(');
        for (uint32_t i = 0; i < o->n_results; i++) {
            cm_buf_puts(&b, i > 0 ? ", " : "");
            hlo_shape(sp_value_type(m, o->first_result + i), &b);
        }
        cm_buf_putc(&b, ')');
        sp_attr *t = b.oom ? NULL : str_attr(m, b.data, b.len);
        cm_buf_fini(&b);
        if (t == NULL || op_put(m, op, "xla_shape", t) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

/* True when op lies inside the regions of anc. */
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

/* MHLO's sink-constants-to-control-flow, which XLA's conversion runs: a
 * constant defined outside a while, if or case and used in one of its
 * regions is cloned to the start of that region; the original goes when
 * nothing else uses it. */
typedef struct cf_list {
    uint32_t *v;
    uint32_t n, cap;
} cf_list;

static cm_status sink_constants(sp_module *m, uint32_t cf, cf_list *sunk)
{
    for (uint32_t r = 0; r < m->ops[cf].n_regions; r++) {
        if (m->ops[cf].regions[r].n_blocks == 0) {
            continue;
        }
        uint32_t blk = m->ops[cf].regions[r].blocks[0], at = 0;
        for (uint32_t c = 0; c < m->n_ops; c++) {
            if (m->ops[c].kind != SP_OP_CONSTANT || m->ops[c].parent_block == SP_NONE ||
                m->ops[c].n_results != 1 || inside(m, c, cf)) {
                continue;
            }
            uint32_t v = m->ops[c].first_result, clone = SP_NONE;
            for (uint32_t u = 0; u < m->n_ops; u++) {
                if (m->ops[u].parent_block == SP_NONE || !inside(m, u, cf)) {
                    continue;
                }
                /* only users in this region */
                uint32_t b = m->ops[u].parent_block, owner = u;
                while (b != SP_NONE && b != blk) {
                    owner = m->blocks[b].parent_op;
                    b = owner != SP_NONE ? m->ops[owner].parent_block : SP_NONE;
                }
                if (b != blk) {
                    continue;
                }
                for (uint32_t k = 0; k < m->ops[u].n_operands; k++) {
                    if (m->ops[u].operands[k] != v) {
                        continue;
                    }
                    if (clone == SP_NONE) {
                        if (sp_op_clone_detached(m, c, &clone) != CM_OK ||
                            sp_block_insert_op(m, blk, at++, clone) != CM_OK ||
                            CM_GROW_U32(sunk->v, sunk->cap, sunk->n + 1, NULL) != CM_OK) {
                            return CM_ENOMEM;
                        }
                        sunk->v[sunk->n++] = c;
                    }
                    m->ops[u].operands[k] = m->ops[clone].first_result;
                }
            }
        }
    }
    return CM_OK;
}

/* The sunk constants nothing uses any more are removed. */
static void remove_sunk(sp_module *m, const cf_list *sunk)
{
    for (uint32_t i = 0; i < sunk->n; i++) {
        uint32_t c = sunk->v[i], v = m->ops[c].first_result;
        bool used = false;
        for (uint32_t u = 0; u < m->n_ops && !used; u++) {
            for (uint32_t k = 0; m->ops[u].parent_block != SP_NONE && k < m->ops[u].n_operands;
                 k++) {
                used = used || m->ops[u].operands[k] == v;
            }
        }
        uint32_t idx = used || m->ops[c].parent_block == SP_NONE ? SP_NONE
                                                                  : sp_op_index_in_block(m, c);
        if (idx != SP_NONE) {
            sp_block_remove_op(m, m->ops[c].parent_block, idx);
        }
    }
}

static cm_status collect_cf(sp_module *m, uint32_t op, void *ctx)
{
    cf_list *l = ctx;
    uint32_t k = m->ops[op].kind;
    if (k != SP_OP_WHILE && k != SP_OP_IF && k != SP_OP_CASE) {
        return CM_OK;
    }
    if (CM_GROW_U32(l->v, l->cap, l->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    l->v[l->n++] = op;
    return CM_OK;
}

/* The name an HLO computation gets back: the function name with the
 * ".N" id suffix XLA's builder gives each called computation (N counting
 * the non-entry computations, in module order). */
static cm_status rename_funcs(sp_module *m)
{
    const sp_block *top = &m->blocks[m->body];
    uint32_t n = 0;
    for (uint32_t i = 0; i < top->n_ops; i++) {
        uint32_t f = top->ops[i];
        const sp_attr *name = sp_op_attr(m, f, "sym_name");
        if (m->ops[f].kind != SP_OP_FUNC_FUNC || name == NULL || name->kind != SP_ATTR_STRING ||
            strcmp(name->u.str.s, "main") == 0) {
            continue;
        }
        char buf[512];
        int len = snprintf(buf, sizeof buf, "%s.%u", name->u.str.s, ++n);
        if (len < 0 || (size_t)len >= sizeof buf) {
            continue;
        }
        const char *old = name->u.str.s;
        sp_attr *nn = str_attr(m, buf, (size_t)len);
        if (nn == NULL || sp_op_set_attr(m, f, "sym_name", nn) != CM_OK) {
            return CM_ENOMEM;
        }
        for (uint32_t o = 0; o < m->n_ops; o++) {
            for (uint32_t a = 0; a < m->ops[o].n_attrs; a++) {
                sp_attr *v = m->ops[o].attrs[a].value;
                if (v != NULL && v->kind == SP_ATTR_SYMBOL && strcmp(v->u.sym, old) == 0 &&
                    strcmp(m->ops[o].attrs[a].name, "callee") == 0) {
                    sp_attr *s = sp_attr_new(m, SP_ATTR_SYMBOL);
                    if (s == NULL) {
                        return CM_ENOMEM;
                    }
                    s->u.sym = nn->u.str.s;
                    m->ops[o].attrs[a].value = s;
                }
            }
        }
        top = &m->blocks[m->body];
    }
    return CM_OK;
}

/* A one-result computation's ROOT is the returned instruction itself, so
 * its sharding comes back as the result's when the result had none. */
static cm_status root_sharding(sp_module *m, uint32_t f)
{
    const sp_type *ft = sp_func_type(m, f);
    if (ft == NULL || ft->n_results != 1 || m->ops[f].n_regions == 0 ||
        m->ops[f].regions[0].n_blocks == 0) {
        return CM_OK;
    }
    const sp_block *b = &m->blocks[m->ops[f].regions[0].blocks[0]];
    if (b->n_ops == 0) {
        return CM_OK;
    }
    uint32_t ret = b->ops[b->n_ops - 1];
    const sp_attr *res = list_item(sp_op_attr(m, f, "res_attrs"), 0);
    if (m->ops[ret].n_operands != 1 ||
        (res != NULL && res->kind == SP_ATTR_DICT &&
         sp_attrs_get(res->u.dict.items, res->u.dict.n, "mhlo.sharding") != NULL)) {
        return CM_OK;
    }
    uint32_t def = m->values[m->ops[ret].operands[0]].def;
    const sp_attr *hs = def != SP_NONE && m->ops[def].n_results == 1
                            ? sp_op_attr(m, def, "mhlo.sharding")
                            : NULL;
    if (hs == NULL || hs->kind != SP_ATTR_STRING) {
        return CM_OK;
    }
    sp_attr *copy = str_attr(m, hs->u.str.s, hs->u.str.len);
    return copy == NULL ? CM_ENOMEM : sp_func_set_result_attr(m, f, 0, "mhlo.sharding", copy);
}

cm_status sp_gspmd_hlo_round_trip(sp_module *m, cm_error *err)
{
    cm_status st = CM_OK;
    const sp_block *top = &m->blocks[m->body];
    cf_list l = {NULL, 0, 0}, sunk = {NULL, 0, 0};
    for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind != SP_OP_FUNC_FUNC) {
            continue;
        }
        st = filter_list(m, f, "arg_attrs", false);
        if (st == CM_OK) {
            st = filter_list(m, f, "res_attrs", true);
        }
        if (st == CM_OK) {
            st = root_sharding(m, f);
        }
        if (st == CM_OK && m->ops[f].n_regions > 0 && m->ops[f].regions[0].n_blocks > 0) {
            st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], hlo_op, NULL);
            if (st == CM_OK) {
                st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], collect_cf, &l);
            }
        }
        top = &m->blocks[m->body];
    }
    for (uint32_t i = 0; i < l.n && st == CM_OK; i++) {
        st = sink_constants(m, l.v[i], &sunk);
    }
    if (st == CM_OK) {
        remove_sunk(m, &sunk);
    }
    cm_free(l.v);
    cm_free(sunk.v);
    if (st == CM_OK) {
        st = rename_funcs(m);
    }
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}

/* ---- reading escaped xla.sdy strings back ------------------------------------------- */

/* d's xla.sdy.* strings with XLA's escapes undone (a backslash makes the
 * next byte literal, as absl::CUnescape reads `\"` and `\\`); NULL when
 * none changes, or on OOM (*oom set). A string with an unescaped quote is
 * left as it is. Other backslashes (MLIR's `\22` in
 * a nested string) are left for the mesh reader. */
/* True when s holds a quote without a backslash before it: a mesh list
 * whose meshes are quoted strings (their own escapes, read by the mesh
 * reader), not one escaped whole. */
static bool has_bare_quote(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\') {
            i++;
        } else if (s[i] == '"') {
            return true;
        }
    }
    return false;
}

static sp_attr *unescape_dict(sp_module *m, const sp_attr *d, bool *oom)
{
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return NULL;
    }
    sp_attr *r = NULL;
    for (uint32_t i = 0; i < d->u.dict.n; i++) {
        const sp_attr *v = d->u.dict.items[i].value;
        if (strncmp(d->u.dict.items[i].name, "xla.sdy.", 8) != 0 || v == NULL ||
            v->kind != SP_ATTR_STRING || memchr(v->u.str.s, '\\', v->u.str.len) == NULL ||
            has_bare_quote(v->u.str.s, v->u.str.len)) {
            continue;
        }
        char *u = cm_arena_alloc(&m->arena, v->u.str.len + 1);
        if (r == NULL) {
            r = sp_attr_new(m, SP_ATTR_DICT);
            sp_named_attr *items =
                r != NULL ? cm_arena_alloc(&m->arena, sizeof *items * (d->u.dict.n + 1u)) : NULL;
            if (items != NULL) {
                memcpy(items, d->u.dict.items, sizeof *items * d->u.dict.n);
                r->u.dict.items = items;
                r->u.dict.n = d->u.dict.n;
            } else {
                r = NULL;
            }
        }
        sp_attr *s = sp_attr_new(m, SP_ATTR_STRING);
        if (u == NULL || r == NULL || s == NULL) {
            *oom = true;
            return NULL;
        }
        size_t o = 0;
        for (size_t k = 0; k < v->u.str.len; k++) {
            char nx = k + 1 < v->u.str.len ? v->u.str.s[k + 1] : '\0';
            if (v->u.str.s[k] == '\\' && (nx == '"' || nx == '\'' || nx == '\\')) {
                k++;
            }
            u[o++] = v->u.str.s[k];
        }
        u[o] = '\0';
        s->u.str.s = u;
        s->u.str.len = o;
        r->u.dict.items[i].value = s;
    }
    return r;
}

static cm_status unescape_list(sp_module *m, uint32_t f, const char *key)
{
    const sp_attr *arr = sp_op_attr(m, f, key);
    for (uint32_t i = 0; arr != NULL && arr->kind == SP_ATTR_ARRAY && i < arr->u.arr.n; i++) {
        const sp_attr *d = arr->u.arr.items[i];
        const sp_attr *fe = d != NULL && d->kind == SP_ATTR_DICT
                                ? sp_attrs_get(d->u.dict.items, d->u.dict.n, FRONTEND)
                                : NULL;
        bool oom = false;
        sp_attr *u = unescape_dict(m, fe, &oom);
        if (oom || (u != NULL && sp_func_set_arg_attr(m, f, i, FRONTEND, u) != CM_OK)) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

cm_status sp_gspmd_unescape_frontend(sp_module *m, cm_error *err)
{
    bool oom = false;
    sp_attr *u = unescape_dict(m, sp_attrs_get(m->attrs, m->n_attrs, FRONTEND), &oom);
    if (u != NULL) {
        uint32_t n = 0;
        sp_named_attr *attrs = with_attr(m, m->attrs, m->n_attrs, FRONTEND, u, &n);
        if (attrs == NULL) {
            return cm_error_oom(err);
        }
        m->attrs = attrs;
        m->n_attrs = n;
    }
    for (uint32_t op = 0; op < m->n_ops && !oom; op++) {
        if (m->ops[op].parent_block == SP_NONE) {
            continue;
        }
        if (m->ops[op].kind == SP_OP_FUNC_FUNC && unescape_list(m, op, "arg_attrs") != CM_OK) {
            return cm_error_oom(err);
        }
        u = unescape_dict(m, sp_op_attr(m, op, FRONTEND), &oom);
        if (u != NULL && op_put(m, op, FRONTEND, u) != CM_OK) {
            oom = true;
        }
    }
    return oom ? cm_error_oom(err) : CM_OK;
}
