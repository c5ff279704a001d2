/* SPDX-License-Identifier: Apache-2.0
 * planner: the MLIR printer. Writes a module the way mlir-opt / sdy_opt
 * print it: the custom forms of the StableHLO, func and sdy ops it knows,
 * the generic form for the rest, one op per line, SSA names numbered as
 * MLIR numbers them (per isolated region, nested regions continuing from
 * their parent, constants named %c / %cst with shared conflict suffixes). */
#include "sp_float.h"
#include "sp_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_map.h"
#include "sp_mlir_int.h"
#include "sp_ops.h"
#include "sp_shard.h"
#include "sp_mlir.h"

/* How a value is named. */
typedef struct vname {
    uint8_t kind;     /* VN_* */
    int32_t sub;      /* result index inside a group, -1 when the group has one value */
    uint32_t id;      /* number for VN_NUM / VN_ARG, conflict suffix + 1 for VN_NAMED (0: none) */
    const char *name; /* base name for VN_NAMED */
} vname;

enum { VN_NONE = 0, VN_NUM, VN_ARG, VN_NAMED };

typedef struct pr {
    const sp_module *m;
    const sp_print_opts *o;
    cm_buf *b;
    vname *names;
    int indent;
    cm_arena scratch; /* conflict-suffixed names */
    /* used-name set for named values, scoped like MLIR's (a list with marks) */
    struct used_name {
        const char *s;
        uint32_t len;
    } *used;
    uint32_t n_used, cap_used;
    const char *sole_prop; /* generic form: the op's only inherent attribute, or NULL */
    bool no_test_dialects; /* check and interpreter ops in the generic form */
    uint32_t *slots;       /* hash of used[] positions, USED_EMPTY / USED_TOMB */
    uint32_t cap_slots, n_filled;
    /* the last float literal of a dense body and its canonical text: the
     * same constant (0.0) recurs, and its rounding check is costly */
    bool fl_ok;
    char fl_lit[64], fl_elem[16], fl_out[64];
    size_t fl_len;
} pr;

/* ---- naming ------------------------------------------------------------------- */

typedef struct ctx {
    uint32_t next_value, next_arg, next_conflict;
    uint32_t used_mark;
} ctx;

/* The used-name set is a stack (used[], truncated to a mark when a scope
 * ends) indexed by an open-addressing hash table of stack positions, so
 * that naming thousands of constants stays linear. */
#define USED_EMPTY UINT32_MAX
#define USED_TOMB  (UINT32_MAX - 1)

static uint32_t used_hash(const char *s, uint32_t n)
{
    return (uint32_t)cm_hash_bytes(s, n);
}

/* Slot holding name s, or USED_EMPTY when absent. */
static uint32_t used_find(const pr *p, const char *s, uint32_t n)
{
    if (p->cap_slots == 0) {
        return USED_EMPTY;
    }
    for (uint32_t j = used_hash(s, n) & (p->cap_slots - 1);; j = (j + 1) & (p->cap_slots - 1)) {
        uint32_t e = p->slots[j];
        if (e == USED_EMPTY) {
            return USED_EMPTY;
        }
        if (e != USED_TOMB && p->used[e].len == n && memcmp(p->used[e].s, s, n) == 0) {
            return j;
        }
    }
}

static bool used_has(const pr *p, const char *s, uint32_t n)
{
    return used_find(p, s, n) != USED_EMPTY;
}

/* Pops used names down to mark (leaving finished scopes). */
static void used_truncate(pr *p, uint32_t mark)
{
    while (p->n_used > mark) {
        p->n_used--;
        uint32_t j = used_find(p, p->used[p->n_used].s, p->used[p->n_used].len);
        if (j != USED_EMPTY) {
            p->slots[j] = USED_TOMB;
        }
    }
}

static bool used_rehash(pr *p, uint32_t cap)
{
    uint32_t *s = cm_alloc(sizeof(uint32_t) * cap);
    if (s == NULL) {
        return false;
    }
    memset(s, 0xff, sizeof(uint32_t) * cap);
    for (uint32_t i = 0; i < p->n_used; i++) {
        uint32_t j = used_hash(p->used[i].s, p->used[i].len) & (cap - 1);
        while (s[j] != USED_EMPTY) {
            j = (j + 1) & (cap - 1);
        }
        s[j] = i;
    }
    cm_free(p->slots);
    p->slots = s;
    p->cap_slots = cap;
    p->n_filled = p->n_used;
    return true;
}

static void used_add(pr *p, const char *s, uint32_t n)
{
    if (CM_GROW_U32(p->used, p->cap_used, p->n_used + 1, NULL) != CM_OK) {
        p->b->oom = true;
        return;
    }
    /* tombstones count as filled until the next rehash */
    if ((p->n_filled + 1) * 2 > p->cap_slots) {
        uint32_t cap = p->cap_slots == 0 ? 64 : p->cap_slots;
        if ((p->n_used + 1) * 4 > cap) {
            cap *= 2; /* else rehashing just drops the tombstones */
        }
        if (!used_rehash(p, cap)) {
            p->b->oom = true;
            return;
        }
    }
    p->used[p->n_used] = (struct used_name){s, n};
    uint32_t j = used_hash(s, n) & (p->cap_slots - 1);
    while (p->slots[j] != USED_EMPTY && p->slots[j] != USED_TOMB) {
        j = (j + 1) & (p->cap_slots - 1);
    }
    if (p->slots[j] == USED_EMPTY) {
        p->n_filled++;
    }
    p->slots[j] = p->n_used++;
}

/* Names value v base (e.g. "c"), uniquing with the shared conflict counter. */
static void name_value(pr *p, ctx *c, uint32_t v, const char *base, int32_t sub)
{
    uint32_t n = (uint32_t)strlen(base);
    vname *vn = &p->names[v];
    vn->kind = VN_NAMED;
    vn->name = base;
    vn->sub = sub;
    vn->id = 0;
    if (!used_has(p, base, n)) {
        used_add(p, base, n);
        return;
    }
    /* base_K for the first free conflict id K; remembered by id = K + 1 */
    char tmp[96];
    for (;;) {
        uint32_t k = c->next_conflict++;
        int len = snprintf(tmp, sizeof tmp, "%s_%u", base, k);
        if (len < 0 || (size_t)len >= sizeof tmp) {
            vn->kind = VN_NUM;
            vn->id = c->next_value++;
            return;
        }
        if (!used_has(p, tmp, (uint32_t)len)) {
            vn->id = k + 1;
            char *copy = cm_arena_strndup(&p->scratch, tmp, (size_t)len);
            if (copy == NULL) {
                p->b->oom = true;
                return;
            }
            used_add(p, copy, (uint32_t)len);
            return;
        }
    }
}

static bool is_int_elem(sp_elem e)
{
    return e >= SP_ELEM_I1 && e <= SP_ELEM_UI64;
}

/* arith.constant's result name: %true / %false for i1, %c42_i32 for an
 * integer, %c42 for an index, %cst for anything else. */
static const char *arith_constant_name(pr *p, const sp_op *op)
{
    const sp_attr *v = sp_attrs_get(op->attrs, op->n_attrs, "value");
    if (v != NULL && v->kind == SP_ATTR_BOOL) {
        return v->u.b ? "true" : "false";
    }
    if (v == NULL || v->kind != SP_ATTR_INT || v->u.i.type == NULL) {
        return "cst";
    }
    if (strcmp(v->u.i.type, "i1") == 0) {
        return v->u.i.v ? "true" : "false";
    }
    char tmp[64];
    bool is_index = strcmp(v->u.i.type, "index") == 0;
    int len = snprintf(tmp, sizeof tmp, "c%lld%s%s", (long long)v->u.i.v, is_index ? "" : "_",
                       is_index ? "" : v->u.i.type);
    if (len < 0 || (size_t)len >= sizeof tmp) {
        return "cst";
    }
    const char *name = cm_arena_strndup(&p->scratch, tmp, (size_t)len);
    if (name == NULL) {
        p->b->oom = true;
        return "cst";
    }
    return name;
}

static void number_block(pr *p, ctx *c, const sp_block *bl, bool while_args)
{
    for (uint32_t i = 0; i < bl->n_args; i++) {
        uint32_t v = bl->first_arg + i;
        if (while_args) {
            name_value(p, c, v, "iterArg", -1);
        } else {
            p->names[v].kind = VN_ARG;
            p->names[v].id = c->next_arg++;
            p->names[v].sub = -1;
        }
    }
    for (uint32_t i = 0; i < bl->n_ops; i++) {
        const sp_op *op = &p->m->ops[bl->ops[i]];
        if (op->n_results == 0) {
            continue;
        }
        if (op->kind == SP_OP_CONSTANT && op->n_results == 1) {
            /* StableHLO: %c for integer element types, %cst for the rest
             * (sdy.constant names no result: it prints as %N) */
            const sp_type *t = &p->m->types[p->m->values[op->first_result].type];
            name_value(p, c, op->first_result,
                       t->kind == SP_TYPE_TENSOR && is_int_elem(t->elem) ? "c" : "cst", -1);
            continue;
        }
        if (op->kind == SP_OP_UNKNOWN && op->n_results == 1 &&
            strcmp(op->name, "arith.constant") == 0) {
            name_value(p, c, op->first_result, arith_constant_name(p, op), -1);
            continue;
        }
        if (op->kind == SP_OP_RNG_BIT_GENERATOR && op->n_results == 2) {
            name_value(p, c, op->first_result, "output_state", -1);
            name_value(p, c, op->first_result + 1, "output", -1);
            continue;
        }
        uint32_t id = c->next_value++;
        for (uint32_t j = 0; j < op->n_results; j++) {
            vname *vn = &p->names[op->first_result + j];
            vn->kind = VN_NUM;
            vn->id = id;
            vn->sub = op->n_results > 1 ? (int32_t)j : -1;
        }
    }
}

/* Numbers the regions of op the way MLIR's SSANameState does. */
static void number_regions(pr *p, const sp_op *op, ctx start)
{
    /* explicit stack of (region, context) */
    typedef struct item {
        const sp_op *op;
        uint32_t region;
        ctx c;
    } item;
    item *stk = NULL;
    uint32_t n = 0, cap = 0;
    for (uint32_t r = 0; r < op->n_regions; r++) {
        if (CM_GROW_U32(stk, cap, n + 1, NULL) != CM_OK) {
            p->b->oom = true;
            cm_free(stk);
            return;
        }
        stk[n++] = (item){op, r, start};
    }
    while (n > 0) {
        item it = stk[--n];
        ctx c = it.c;
        used_truncate(p, c.used_mark); /* leave the scopes of finished siblings */
        const sp_region *rg = &it.op->regions[it.region];
        bool while_args = it.op->kind == SP_OP_WHILE;
        for (uint32_t bi = 0; bi < rg->n_blocks; bi++) {
            number_block(p, &c, &p->m->blocks[rg->blocks[bi]], while_args && bi == 0);
        }
        c.used_mark = p->n_used;
        for (uint32_t bi = 0; bi < rg->n_blocks; bi++) {
            const sp_block *bl = &p->m->blocks[rg->blocks[bi]];
            for (uint32_t i = 0; i < bl->n_ops; i++) {
                const sp_op *child = &p->m->ops[bl->ops[i]];
                for (uint32_t r = 0; r < child->n_regions; r++) {
                    if (CM_GROW_U32(stk, cap, n + 1, NULL) != CM_OK) {
                        p->b->oom = true;
                        cm_free(stk);
                        return;
                    }
                    stk[n++] = (item){child, r, c};
                }
            }
        }
    }
    cm_free(stk);
}

/* ---- basic output --------------------------------------------------------------- */

static void put(pr *p, const char *s)
{
    cm_buf_puts(p->b, s);
}

static void putn(pr *p, const char *s, size_t n)
{
    cm_buf_append(p->b, s, n);
}

static void putc_(pr *p, char c)
{
    cm_buf_putc(p->b, c);
}

static void newline(pr *p)
{
    putc_(p, '\n');
    for (int i = 0; i < p->indent; i++) {
        putn(p, "  ", 2);
    }
}

static void value_ref(pr *p, uint32_t v, bool with_sub)
{
    const vname *vn = &p->names[v];
    putc_(p, '%');
    switch (vn->kind) {
    case VN_ARG:
        put(p, "arg");
        cm_buf_put_i64(p->b, vn->id);
        break;
    case VN_NAMED:
        put(p, vn->name);
        if (vn->id > 0) {
            putc_(p, '_');
            cm_buf_put_i64(p->b, (int64_t)vn->id - 1);
        }
        break;
    default:
        cm_buf_put_i64(p->b, vn->id);
        break;
    }
    if (with_sub && vn->sub >= 0) {
        putc_(p, '#');
        cm_buf_put_i64(p->b, vn->sub);
    }
}

static void type_ref(pr *p, uint32_t t)
{
    const sp_type *ty = &p->m->types[t];
    putn(p, ty->text, ty->text_len);
}

static bool is_bare_id(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) {
        return false;
    }
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '$' || c == '.')) {
            return false;
        }
    }
    return true;
}

static void symbol(pr *p, const char *s)
{
    putc_(p, '@');
    if (is_bare_id(s)) {
        put(p, s);
    } else {
        sp_mlir_print_string(p->b, s, strlen(s));
    }
}

/* ---- attributes -------------------------------------------------------------------- */

static void attr_ctx(pr *p, const sp_attr *a, bool bare);

/* A full attribute: an untyped integer or float is an i64 / f64 attribute
 * and MLIR prints its type. */
static void attr(pr *p, const sp_attr *a)
{
    attr_ctx(p, a, false);
}

static int cmp_named(const void *x, const void *y)
{
    const sp_named_attr *a = x, *b = y;
    return strcmp(a->name, b->name);
}

/* Prints `{a = 1, b}` of the attrs not excluded; sorted by name like MLIR's
 * DictionaryAttr. only_props: 1 = only names without '.', 2 = only with '.',
 * 0 = all. */
static void attr_dict(pr *p, const sp_named_attr *attrs, uint32_t n, const char *const *skip,
                      int only, bool leading_space)
{
    sp_named_attr local[32];
    sp_named_attr *sel = n <= 32 ? local : cm_alloc(sizeof(sp_named_attr) * n);
    if (sel == NULL) {
        p->b->oom = true;
        return;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        bool skipped = false;
        for (const char *const *s = skip; s != NULL && *s != NULL; s++) {
            if (strcmp(*s, attrs[i].name) == 0) {
                skipped = true;
            }
        }
        /* a property: an inherent attribute, guessed as one without a dialect
         * prefix unless the op's only inherent attribute is known; XLA's own
         * undotted names (xla_shape) are discardable */
        bool prop = p->sole_prop != NULL ? strcmp(attrs[i].name, p->sole_prop) == 0
                                         : strchr(attrs[i].name, '.') == NULL &&
                                               strncmp(attrs[i].name, "xla_", 4) != 0;
        if (skipped || (only == 1 && !prop) || (only == 2 && prop)) {
            continue;
        }
        sel[k++] = attrs[i];
    }
    if (k > 0) {
        qsort(sel, k, sizeof sel[0], cmp_named);
        if (leading_space) {
            putc_(p, ' ');
        }
        putc_(p, '{');
        for (uint32_t i = 0; i < k; i++) {
            if (i > 0) {
                put(p, ", ");
            }
            if (is_bare_id(sel[i].name)) {
                put(p, sel[i].name);
            } else {
                sp_mlir_print_string(p->b, sel[i].name, strlen(sel[i].name));
            }
            if (sel[i].value->kind != SP_ATTR_UNIT) {
                put(p, " = ");
                attr(p, sel[i].value);
            }
        }
        putc_(p, '}');
    }
    if (sel != local) {
        cm_free(sel);
    }
}

static void int_array(pr *p, const int64_t *v, uint32_t n)
{
    putc_(p, '[');
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            put(p, ", ");
        }
        cm_buf_put_i64(p->b, v[i]);
    }
    putc_(p, ']');
}

/* Integers of an int, dense array or array-of-ints attribute into buf (at
 * most max); false when a is none of these or too long. Never allocates, so
 * printing cannot fail half-way for lack of memory. */
static bool ints_of(const sp_attr *a, int64_t *buf, uint32_t max, uint32_t *n_out)
{
    if (a == NULL) {
        return false;
    }
    switch (a->kind) {
    case SP_ATTR_INT:
        buf[0] = a->u.i.v;
        *n_out = 1;
        return max >= 1;
    case SP_ATTR_DENSE_ARRAY:
        if (a->u.darr.n > max) {
            return false;
        }
        memcpy(buf, a->u.darr.v, sizeof(int64_t) * a->u.darr.n);
        *n_out = a->u.darr.n;
        return true;
    case SP_ATTR_ARRAY:
        if (a->u.arr.n > max) {
            return false;
        }
        for (uint32_t i = 0; i < a->u.arr.n; i++) {
            if (a->u.arr.items[i]->kind != SP_ATTR_INT) {
                return false;
            }
            buf[i] = a->u.arr.items[i]->u.i.v;
        }
        *n_out = a->u.arr.n;
        return true;
    default:
        return false;
    }
}

static const char conv_letter[3][2] = {{'b', 'f'}, {'i', 'o'}, {'b', 'f'}};

/* `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` from a stablehlo.conv PARAMS. */
static bool conv_compact(pr *p, const sp_attr *a)
{
    if (a->u.params.n != 9) {
        return false;
    }
    bool ok = true;
    for (int g = 0; g < 3 && ok; g++) {
        int64_t one[1], two[1], spat[SP_MAX_RANK];
        uint32_t n1, n2, ns;
        if (!ints_of(a->u.params.items[g * 3].value, one, 1, &n1) ||
            !ints_of(a->u.params.items[g * 3 + 1].value, two, 1, &n2) ||
            !ints_of(a->u.params.items[g * 3 + 2].value, spat, SP_MAX_RANK, &ns) || n1 != 1 ||
            n2 != 1 || ns + 2 > SP_MAX_RANK) {
            ok = false;
            break;
        }
        uint32_t rank = ns + 2;
        char slots[SP_MAX_RANK][24];
        bool set[SP_MAX_RANK] = {false};
        if (one[0] < 0 || one[0] >= rank || two[0] < 0 || two[0] >= rank) {
            ok = false;
            break;
        }
        snprintf(slots[one[0]], sizeof slots[0], "%c", conv_letter[g][0]);
        set[one[0]] = true;
        snprintf(slots[two[0]], sizeof slots[0], "%c", conv_letter[g][1]);
        set[two[0]] = true;
        for (uint32_t i = 0; i < ns; i++) {
            if (spat[i] < 0 || spat[i] >= rank || set[spat[i]]) {
                ok = false;
                break;
            }
            snprintf(slots[spat[i]], sizeof slots[0], "%u", i);
            set[spat[i]] = true;
        }
        if (!ok) {
            break;
        }
        if (g == 1) {
            putc_(p, 'x');
        } else if (g == 2) {
            put(p, "->");
        }
        putc_(p, '[');
        for (uint32_t i = 0; i < rank; i++) {
            put(p, i ? ", " : "");
            put(p, set[i] ? slots[i] : "?");
        }
        putc_(p, ']');
    }
    return ok;
}

/* `{"x", "y":(1)2}` */
static void axis_list(pr *p, const sp_axis_list *l)
{
    putc_(p, '{');
    for (uint32_t i = 0; i < l->n; i++) {
        if (i > 0) {
            put(p, ", ");
        }
        sp_axis_ref_print(&l->axes[i], p->b);
    }
    putc_(p, '}');
}

/* `[{"x"}, {}]` or, for all-to-all parameters, `[{"x"}: 0->1]` */
static void axis_lists(pr *p, const sp_attr *a)
{
    bool a2a = a->kind == SP_ATTR_ALL_TO_ALL;
    uint32_t n = a2a ? a->u.a2a.n : a->u.axis_lists.n;
    putc_(p, '[');
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            put(p, ", ");
        }
        if (a2a) {
            const sp_all_to_all_param *q = &a->u.a2a.items[i];
            axis_list(p, &q->axes);
            put(p, ": ");
            cm_buf_put_i64(p->b, q->src_dim);
            put(p, "->");
            cm_buf_put_i64(p->b, q->tgt_dim);
        } else {
            axis_list(p, &a->u.axis_lists.items[i]);
        }
    }
    putc_(p, ']');
}

/* Nested `[[1, 2], [3, 4]]` of n = prod(dims) integers. */
static void dense_nested(pr *p, const int64_t *v, const int64_t *dims, uint32_t rank, bool is_bool,
                         int64_t stride)
{
    if (rank == 0) {
        if (is_bool) {
            put(p, *v ? "true" : "false");
        } else {
            cm_buf_put_i64(p->b, *v);
        }
        return;
    }
    int64_t inner = stride / (dims[0] > 0 ? dims[0] : 1);
    putc_(p, '[');
    for (int64_t i = 0; i < dims[0]; i++) {
        if (i > 0) {
            put(p, ", ");
        }
        dense_nested(p, v + i * inner, dims + 1, rank - 1, is_bool, inner);
    }
    putc_(p, ']');
}

/* Elements [at, at + stride) of a float tensor's canonical literals (text,
 * element i at off[i] .. off[i + 1]) as nested lists over dims. */
static void dense_nested_floats(pr *p, const char *text, const size_t *off, size_t at,
                                const int64_t *dims, uint32_t rank, size_t stride)
{
    if (rank == 0) {
        cm_buf_append(p->b, text + off[at], off[at + 1u] - off[at]);
        return;
    }
    size_t inner = stride / (size_t)(dims[0] > 0 ? dims[0] : 1);
    putc_(p, '[');
    for (int64_t i = 0; i < dims[0]; i++) {
        if (i > 0) {
            put(p, ", ");
        }
        dense_nested_floats(p, text, off, at + (size_t)i * inner, dims + 1, rank - 1, inner);
    }
    putc_(p, ']');
}

/* sp_mlir_print_float(out, 0.0, lit, elem), remembering the last answer. */
static void float_lit(pr *p, cm_buf *out, const char *lit, const char *elem)
{
    if (p->fl_ok && strcmp(p->fl_lit, lit) == 0 && strcmp(p->fl_elem, elem) == 0) {
        cm_buf_append(out, p->fl_out, p->fl_len);
        return;
    }
    size_t at = out->len;
    sp_mlir_print_float(out, 0.0, lit, elem);
    size_t n = out->len - at;
    p->fl_ok = !out->oom && n < sizeof p->fl_out && strlen(lit) < sizeof p->fl_lit &&
               strlen(elem) < sizeof p->fl_elem;
    if (p->fl_ok) {
        memcpy(p->fl_out, out->data + at, n);
        p->fl_len = n;
        strcpy(p->fl_lit, lit);
        strcpy(p->fl_elem, elem);
    }
}

/* A float tensor's dense body (f16, bf16, f32, f64) as MLIR prints it: each
 * element as printFloatValue does (sp_mlir_print_float: "1.000000e+00"),
 * one when all are equal (a splat), else nested lists. False when the body
 * is not a list of total float literals (a hex blob, complex pairs, a count
 * that disagrees): the caller prints it verbatim. */
static bool dense_floats(pr *p, const char *body, const char *elem, const int64_t *dims,
                         uint32_t rank, int64_t total)
{
    if (total <= 0 || body[0] == '"') {
        return false;
    }
    /* past 2^20 elements only a splat (one literal) is rewritten */
    size_t cap = (total > (1 << 20) ? 1u : (size_t)total) + 1u, n = 0;
    size_t *off = cm_calloc(cap, sizeof *off);
    cm_buf canon;
    cm_buf_init(&canon);
    bool ok = off != NULL;
    char lit[64];
    for (const char *q = body; ok && *q != '\0';) {
        if (*q == '[' || *q == ']' || *q == ',' || *q == ' ' || *q == '\n' || *q == '\t') {
            q++;
            continue;
        }
        size_t len = strcspn(q, "[], \n\t");
        ok = len < sizeof lit && n + 1u < cap && *q != '(';
        if (ok) {
            memcpy(lit, q, len);
            lit[len] = '\0';
            char *end = NULL;
            const char *d = lit[0] == '-' || lit[0] == '+' ? lit + 1 : lit;
            if (!(d[0] == '0' && (d[1] == 'x' || d[1] == 'X'))) {
                (void)strtod(lit, &end);
                ok = end != NULL && *end == '\0' && end != lit;
            }
        }
        if (ok) {
            off[n++] = canon.len;
            float_lit(p, &canon, lit, elem);
            ok = canon.data != NULL;
        }
        q += len;
    }
    if (ok && n > 0) {
        off[n] = canon.len;
        bool splat = true;
        for (size_t i = 1; splat && i < n; i++) {
            splat = off[i + 1u] - off[i] == off[1] - off[0] &&
                    memcmp(canon.data + off[i], canon.data, off[1] - off[0]) == 0;
        }
        if (n == 1 || (splat && (int64_t)n == total)) {
            cm_buf_append(p->b, canon.data, off[1]);
        } else if ((int64_t)n == total) {
            dense_nested_floats(p, canon.data, off, 0, dims, rank, (size_t)total);
        } else {
            ok = false;
        }
    }
    cm_free(off);
    cm_buf_fini(&canon);
    return ok && n > 0;
}

/* The body of dense<...>: integer, boolean and float tensors in MLIR's
 * canonical form (a splat when every element is equal, else nested lists),
 * anything else (hex blobs, complex numbers, strings) verbatim. */
static void dense_body(pr *p, const sp_attr *a)
{
    const sp_type *t = &p->m->types[a->u.dense.type];
    if (a->u.dense.ints == NULL && t->kind == SP_TYPE_TENSOR && t->encoding == NULL &&
        sp_float_is(t->elem)) {
        int64_t total = 1;
        for (uint32_t i = 0; i < t->rank && total >= 0; i++) {
            if (t->dims[i] < 0 || !cm_mul_i64(total, t->dims[i], &total)) {
                total = -1;
            }
        }
        if (total >= 0 &&
            dense_floats(p, a->u.dense.body, sp_elem_name(t->elem), t->dims, t->rank, total)) {
            return;
        }
    }
    if (a->u.dense.ints == NULL || t->kind != SP_TYPE_TENSOR || t->encoding != NULL) {
        put(p, a->u.dense.body);
        return;
    }
    int64_t total = 1;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0 || !cm_mul_i64(total, t->dims[i], &total)) {
            put(p, a->u.dense.body);
            return;
        }
    }
    const int64_t *v = a->u.dense.ints;
    uint32_t n = a->u.dense.n_ints;
    bool is_bool = t->elem == SP_ELEM_I1;
    bool splat = n >= 1;
    for (uint32_t i = 1; splat && i < n; i++) {
        splat = v[i] == v[0];
    }
    if (total == 0) {
        return; /* dense<> */
    }
    if (splat && (n == 1 || (int64_t)n == total)) {
        dense_nested(p, v, NULL, 0, is_bool, 1);
    } else if ((int64_t)n == total && total <= 1 << 20) {
        dense_nested(p, v, t->dims, t->rank, is_bool, total);
    } else {
        put(p, a->u.dense.body);
    }
}

/* Prints attribute a; bare: inside a dialect attribute's parameters, where
 * integers and floats are plain values without a type. */
static void attr_ctx(pr *p, const sp_attr *a, bool bare)
{
    switch (a->kind) {
    case SP_ATTR_UNIT:
        put(p, "unit");
        break;
    case SP_ATTR_BOOL:
        put(p, a->u.b ? "true" : "false");
        break;
    case SP_ATTR_INT:
        cm_buf_put_i64(p->b, a->u.i.v);
        if (a->u.i.type != NULL || !bare) {
            put(p, " : ");
            put(p, a->u.i.type != NULL ? a->u.i.type : "i64");
        }
        break;
    case SP_ATTR_FLOAT:
        sp_mlir_print_float(p->b, a->u.f.v, a->u.f.lit, a->u.f.type);
        if (a->u.f.type != NULL || !bare) {
            put(p, " : ");
            put(p, a->u.f.type != NULL ? a->u.f.type : "f64");
        }
        break;
    case SP_ATTR_STRING:
        sp_mlir_print_string(p->b, a->u.str.s, a->u.str.len);
        break;
    case SP_ATTR_SYMBOL:
        symbol(p, a->u.sym);
        break;
    case SP_ATTR_TYPE:
        type_ref(p, a->u.type);
        break;
    case SP_ATTR_ARRAY:
        putc_(p, '[');
        for (uint32_t i = 0; i < a->u.arr.n; i++) {
            if (i > 0) {
                put(p, ", ");
            }
            attr_ctx(p, a->u.arr.items[i], bare);
        }
        putc_(p, ']');
        break;
    case SP_ATTR_DENSE_ARRAY:
        put(p, "array<");
        put(p, a->u.darr.elem);
        if (a->u.darr.n > 0) {
            put(p, ": ");
            bool is_bool = strcmp(a->u.darr.elem, "i1") == 0;
            for (uint32_t i = 0; i < a->u.darr.n; i++) {
                if (i > 0) {
                    put(p, ", ");
                }
                if (is_bool) {
                    put(p, a->u.darr.v[i] ? "true" : "false");
                } else {
                    cm_buf_put_i64(p->b, a->u.darr.v[i]);
                }
            }
        }
        putc_(p, '>');
        break;
    case SP_ATTR_DICT:
        if (a->u.dict.n == 0) {
            put(p, "{}");
        } else {
            attr_dict(p, a->u.dict.items, a->u.dict.n, NULL, 0, false);
        }
        break;
    case SP_ATTR_DENSE:
        put(p, "dense<");
        dense_body(p, a);
        put(p, "> : ");
        type_ref(p, a->u.dense.type);
        break;
    case SP_ATTR_PARAMS:
        putc_(p, '#');
        put(p, a->u.params.name);
        putc_(p, '<');
        if (strcmp(a->u.params.name, "stablehlo.conv") == 0) {
            size_t mark = p->b->len;
            if (conv_compact(p, a)) {
                putc_(p, '>');
                break;
            }
            p->b->len = mark; /* conv_compact may have written a prefix */
            if (p->b->data != NULL) {
                p->b->data[mark] = '\0';
            }
            put(p, "raw ");
        }
        for (uint32_t i = 0, k = 0; i < a->u.params.n; i++) {
            const sp_attr *v = a->u.params.items[i].value;
            if (v->kind == SP_ATTR_ARRAY && v->u.arr.n == 0 &&
                strcmp(a->u.params.name, "stablehlo.dot_algorithm") != 0) {
                continue; /* StableHLO omits empty dimension lists */
            }
            if (((v->kind == SP_ATTR_FLOAT && v->u.f.v == 0.0) ||
                 (v->kind == SP_ATTR_INT && v->u.i.v == 0)) &&
                strcmp(a->u.params.name, "stablehlo.result_accuracy") == 0) {
                continue; /* and the default tolerances of a result accuracy */
            }
            if (v->kind == SP_ATTR_INT && v->u.i.v == 0 &&
                strcmp(a->u.params.items[i].name, "index_vector_dim") == 0 &&
                (strcmp(a->u.params.name, "stablehlo.gather") == 0 ||
                 strcmp(a->u.params.name, "stablehlo.scatter") == 0)) {
                continue; /* and a zero index_vector_dim */
            }
            put(p, k++ ? ", " : "");
            put(p, a->u.params.items[i].name);
            put(p, " = ");
            attr_ctx(p, v, true);
        }
        putc_(p, '>');
        break;
    case SP_ATTR_ENUM:
        if (a->u.enm.kind != NULL && a->u.enm.dialect != NULL) {
            putc_(p, '#');
            put(p, a->u.enm.dialect);
            putc_(p, '<');
            put(p, a->u.enm.kind);
            putc_(p, ' ');
            put(p, a->u.enm.value);
            putc_(p, '>');
        } else {
            put(p, a->u.enm.value);
        }
        break;
    case SP_ATTR_OPAQUE:
        put(p, a->u.opaque.text);
        break;
    case SP_ATTR_MESH:
        put(p, "#sdy.mesh");
        sp_mesh_print(a->u.mesh, p->b);
        break;
    case SP_ATTR_SHARDING:
        put(p, "#sdy.sharding");
        sp_sharding_print(a->u.sharding, p->b);
        break;
    case SP_ATTR_SHARDING_LIST:
        put(p, "#sdy.sharding_per_value<[");
        for (uint32_t i = 0; i < a->u.shardings.n; i++) {
            if (i > 0) {
                put(p, ", ");
            }
            sp_sharding_print(a->u.shardings.items[i], p->b);
        }
        put(p, "]>");
        break;
    case SP_ATTR_RULE:
        put(p, "#sdy.op_sharding_rule");
        sp_rule_print(a->u.rule, p->b);
        break;
    case SP_ATTR_AXIS_LIST:
        put(p, a->u.axes.manual ? "#sdy<manual_axes" : "#sdy<axis_ref_list");
        axis_list(p, &a->u.axes);
        putc_(p, '>');
        break;
    case SP_ATTR_AXIS_LISTS:
        put(p, "#sdy<list_of_axis_ref_lists");
        axis_lists(p, a);
        putc_(p, '>');
        break;
    case SP_ATTR_ALL_TO_ALL:
        put(p, "#sdy<all_to_all_param_list");
        axis_lists(p, a);
        putc_(p, '>');
        break;
    }
}

/* ---- op pieces ---------------------------------------------------------------------- */

static void operands(pr *p, const sp_op *op, uint32_t from)
{
    for (uint32_t i = from; i < op->n_operands; i++) {
        if (i > from) {
            put(p, ", ");
        }
        value_ref(p, op->operands[i], true);
    }
}

static void results_prefix(pr *p, const sp_op *op)
{
    if (op->n_results == 0) {
        return;
    }
    const vname *vn = &p->names[op->first_result];
    if (vn->kind == VN_NUM && op->n_results > 1) {
        value_ref(p, op->first_result, false);
        putc_(p, ':');
        cm_buf_put_i64(p->b, op->n_results);
    } else {
        for (uint32_t i = 0; i < op->n_results; i++) {
            if (i > 0) {
                put(p, ", ");
            }
            value_ref(p, op->first_result + i, false);
        }
    }
    put(p, " = ");
}

static void type_list(pr *p, const uint32_t *vals, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            put(p, ", ");
        }
        type_ref(p, p->m->values[vals[i]].type);
    }
}

static void result_type_list(pr *p, const sp_op *op)
{
    for (uint32_t i = 0; i < op->n_results; i++) {
        if (i > 0) {
            put(p, ", ");
        }
        type_ref(p, p->m->values[op->first_result + i].type);
    }
}

static void functional(pr *p, const sp_op *op)
{
    putc_(p, '(');
    type_list(p, op->operands, op->n_operands);
    put(p, ") -> ");
    bool paren = op->n_results != 1 ||
                 p->m->types[p->m->values[op->first_result].type].kind == SP_TYPE_FUNC;
    if (paren) {
        putc_(p, '(');
    }
    result_type_list(p, op);
    if (paren) {
        putc_(p, ')');
    }
}

/* The tail of most custom forms: ` {attrs but skip} : (Ts) -> Rs`. Returns
 * true, so a printer can end with it. */
static bool tail_functional(pr *p, const sp_op *op, const char *const *skip)
{
    attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    put(p, " : ");
    functional(p, op);
    return true;
}

/* The same with a single type: ` {attrs but skip} : T` (type id t). */
static bool tail_type(pr *p, const sp_op *op, const char *const *skip, uint32_t t)
{
    attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    put(p, " : ");
    type_ref(p, t);
    return true;
}

static void loc(pr *p, const sp_op *op)
{
    if (p->o != NULL && p->o->debug_info && op->loc != NULL) {
        put(p, " loc(");
        put(p, op->loc);
        putc_(p, ')');
    }
}

static void print_op(pr *p, uint32_t opid);

static void block_body(pr *p, const sp_block *bl)
{
    for (uint32_t i = 0; i < bl->n_ops; i++) {
        newline(p);
        print_op(p, bl->ops[i]);
    }
}

/* Prints a region `{ ... }`; the entry block header is printed when it has
 * arguments and print_entry_args is set, or when the region has several blocks. */
static void region(pr *p, const sp_region *rg, bool print_entry_args)
{
    putc_(p, '{');
    p->indent++;
    for (uint32_t bi = 0; bi < rg->n_blocks; bi++) {
        const sp_block *bl = &p->m->blocks[rg->blocks[bi]];
        bool header = bi > 0 || (print_entry_args && bl->n_args > 0) || rg->n_blocks > 1;
        if (header) {
            p->indent--;
            newline(p);
            put(p, "^bb");
            cm_buf_put_i64(p->b, bi);
            if (bl->n_args > 0) {
                putc_(p, '(');
                for (uint32_t i = 0; i < bl->n_args; i++) {
                    if (i > 0) {
                        put(p, ", ");
                    }
                    value_ref(p, bl->first_arg + i, false);
                    put(p, ": ");
                    type_ref(p, p->m->values[bl->first_arg + i].type);
                    if (p->o != NULL && p->o->debug_info && bl->arg_locs != NULL &&
                        bl->arg_locs[i] != NULL) {
                        put(p, " loc(");
                        put(p, bl->arg_locs[i]);
                        putc_(p, ')');
                    }
                }
                putc_(p, ')');
            }
            putc_(p, ':');
            p->indent++;
        }
        block_body(p, bl);
    }
    p->indent--;
    newline(p);
    putc_(p, '}');
}

/* The generic form; quoted = false writes the name bare (the form StableHLO
 * uses for a constant whose value type differs from its result type). */
static void generic_ex(pr *p, const sp_op *op, bool quoted)
{
    if (quoted) {
        sp_mlir_print_string(p->b, op->name, strlen(op->name));
    } else {
        put(p, op->name);
    }
    putc_(p, '(');
    operands(p, op, 0);
    putc_(p, ')');
    const char *sole = op->kind == SP_OP_CONSTANT || op->kind == SP_OP_SDY_CONSTANT ||
                               strcmp(op->name, "arith.constant") == 0
                           ? "value"
                           : NULL;
    p->sole_prop = sole;
    bool has_props = false;
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        if (p->sole_prop != NULL ? strcmp(op->attrs[i].name, p->sole_prop) == 0
                                 : strchr(op->attrs[i].name, '.') == NULL) {
            has_props = true;
        }
    }
    if (has_props) {
        put(p, " <");
        attr_dict(p, op->attrs, op->n_attrs, NULL, 1, false);
        putc_(p, '>');
    }
    p->sole_prop = NULL;
    if (op->n_regions > 0) {
        put(p, " (");
        for (uint32_t r = 0; r < op->n_regions; r++) {
            if (r > 0) {
                put(p, ", ");
            }
            region(p, &op->regions[r], true);
        }
        putc_(p, ')');
    }
    p->sole_prop = sole;
    attr_dict(p, op->attrs, op->n_attrs, NULL, 2, true);
    p->sole_prop = NULL;
    put(p, " : ");
    functional(p, op);
}

static void generic(pr *p, const sp_op *op)
{
    generic_ex(p, op, true);
}

/* ---- custom forms ------------------------------------------------------------------ */

static bool all_same_type(const pr *p, const sp_op *op)
{
    if (op->n_results != 1) {
        return false;
    }
    uint32_t t = p->m->values[op->first_result].type;
    for (uint32_t i = 0; i < op->n_operands; i++) {
        if (p->m->values[op->operands[i]].type != t) {
            return false;
        }
    }
    return true;
}

static bool keyword_op(pr *p, const sp_op *op, const sp_pretty *pd)
{
    const char *skip[SP_MAX_CLAUSES + 2] = {NULL};
    uint32_t ns = 0;
    /* validate before writing anything: every clause attr must have the expected kind */
    for (int i = 0; i < SP_MAX_CLAUSES && pd->clauses[i].key != NULL; i++) {
        const sp_clause *c = &pd->clauses[i];
        const sp_attr *a = sp_attrs_get(op->attrs, op->n_attrs, c->attr);
        if (a == NULL) {
            continue;
        }
        bool ok = true;
        switch (c->kind) {
        case SP_CL_DARR:
            ok = a->kind == SP_ATTR_DENSE_ARRAY && strcmp(a->u.darr.elem, "i64") == 0;
            break;
        case SP_CL_INT:
            ok = a->kind == SP_ATTR_INT;
            break;
        case SP_CL_BOOL:
            ok = a->kind == SP_ATTR_BOOL;
            break;
        case SP_CL_ENUM:
            ok = a->kind == SP_ATTR_ENUM;
            break;
        case SP_CL_STR:
            ok = a->kind == SP_ATTR_STRING;
            break;
        case SP_CL_PRECISION:
            ok = a->kind == SP_ATTR_ARRAY;
            for (uint32_t k = 0; ok && k < a->u.arr.n; k++) {
                ok = a->u.arr.items[k]->kind == SP_ATTR_ENUM;
            }
            break;
        case SP_CL_FORMAT:
            ok = a->kind == SP_ATTR_INT && sp_attrs_get(op->attrs, op->n_attrs, "mantissa_bits") != NULL;
            break;
        case SP_CL_DOTDIMS:
            /* only the four dimension lists, each printable */
            ok = a->kind == SP_ATTR_PARAMS;
            for (uint32_t k = 0; ok && k < a->u.params.n; k++) {
                int64_t tmp[SP_MAX_RANK];
                uint32_t nt;
                const char *nm = a->u.params.items[k].name;
                ok = nm != NULL && strstr(nm, "_dimensions") != NULL &&
                     (strncmp(nm, "lhs_", 4) == 0 || strncmp(nm, "rhs_", 4) == 0) &&
                     ints_of(a->u.params.items[k].value, tmp, SP_MAX_RANK, &nt);
            }
            break;
        case SP_CL_ALGORITHM:
            ok = a->kind == SP_ATTR_PARAMS;
            break;
        }
        if (!ok) {
            return false;
        }
    }
    if ((pd->typing == SP_TY_SELECT && op->n_operands != 3) ||
        ((pd->typing == SP_TY_SAME || pd->typing == SP_TY_SELECT) && op->n_results != 1)) {
        return false;
    }
    if (pd->typing == SP_TY_LIST) {
        /* a terminator has no results; a barrier's results match its operands */
        if (pd->kind == SP_OP_RETURN ? op->n_results != 0 : op->n_results != op->n_operands) {
            return false;
        }
        for (uint32_t i = 0; pd->kind != SP_OP_RETURN && i < op->n_results; i++) {
            if (p->m->values[op->first_result + i].type != p->m->values[op->operands[i]].type) {
                return false;
            }
        }
    }
    results_prefix(p, op);
    put(p, op->kind == SP_OP_FUNC_RETURN ? "return" : op->name);
    bool barrier = op->kind == SP_OP_OPTIMIZATION_BARRIER;
    if (barrier) {
        /* StableHLO: `optimization_barrier attr-dict operands : types` */
        attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    }
    if (op->kind == SP_OP_OPTIMIZATION_BARRIER && op->n_operands == 0) {
        put(p, "()");
    }
    if (op->n_operands > 0) {
        putc_(p, ' ');
        operands(p, op, 0);
    }
    bool first = op->n_operands == 0;
    bool dot_done = false;
    for (int i = 0; i < SP_MAX_CLAUSES && pd->clauses[i].key != NULL; i++) {
        const sp_clause *c = &pd->clauses[i];
        const sp_attr *a = sp_attrs_get(op->attrs, op->n_attrs, c->attr);
        if (a == NULL || (c->kind == SP_CL_DOTDIMS && dot_done)) {
            continue;
        }
        skip[ns++] = c->attr;
        put(p, first ? " " : ", ");
        first = false;
        switch (c->kind) {
        case SP_CL_DARR:
            put(p, c->key);
            put(p, " = ");
            int_array(p, a->u.darr.v, a->u.darr.n);
            break;
        case SP_CL_INT:
            put(p, c->key);
            put(p, " = ");
            cm_buf_put_i64(p->b, a->u.i.v);
            break;
        case SP_CL_BOOL:
            put(p, c->key);
            put(p, a->u.b ? " = true" : " = false");
            break;
        case SP_CL_ENUM:
            put(p, c->key);
            put(p, " = ");
            put(p, a->u.enm.value);
            break;
        case SP_CL_STR:
            put(p, c->key);
            put(p, " = ");
            sp_mlir_print_string(p->b, a->u.str.s, a->u.str.len);
            break;
        case SP_CL_PRECISION:
            put(p, c->key);
            put(p, " = [");
            for (uint32_t k = 0; k < a->u.arr.n; k++) {
                put(p, k ? ", " : "");
                put(p, a->u.arr.items[k]->u.enm.value);
            }
            putc_(p, ']');
            break;
        case SP_CL_FORMAT: {
            const sp_attr *mb = sp_attrs_get(op->attrs, op->n_attrs, "mantissa_bits");
            skip[ns++] = "mantissa_bits";
            put(p, "format = e");
            cm_buf_put_i64(p->b, a->u.i.v);
            putc_(p, 'm');
            cm_buf_put_i64(p->b, mb->u.i.v);
            break;
        }
        case SP_CL_DOTDIMS: {
            dot_done = true;
            static const char *const names[4] = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                                 "lhs_contracting_dimensions",
                                                 "rhs_contracting_dimensions"};
            int64_t v[4][SP_MAX_RANK];
            uint32_t nv[4] = {0, 0, 0, 0};
            for (int k = 0; k < 4; k++) {
                const sp_attr *d = sp_attrs_get(a->u.params.items, a->u.params.n, names[k]);
                if (d != NULL && !ints_of(d, v[k], SP_MAX_RANK, &nv[k])) {
                    nv[k] = 0;
                }
            }
            bool batch = nv[0] > 0 || nv[1] > 0;
            if (batch) {
                put(p, "batching_dims = ");
                int_array(p, v[0], nv[0]);
                put(p, " x ");
                int_array(p, v[1], nv[1]);
                put(p, ", ");
            }
            put(p, "contracting_dims = ");
            int_array(p, v[2], nv[2]);
            put(p, " x ");
            int_array(p, v[3], nv[3]);
            break;
        }
        case SP_CL_ALGORITHM:
            put(p, "algorithm = <");
            for (uint32_t k = 0; k < a->u.params.n; k++) {
                put(p, k ? ", " : "");
                put(p, a->u.params.items[k].name);
                put(p, " = ");
                attr_ctx(p, a->u.params.items[k].value, true);
            }
            putc_(p, '>');
            break;
        }
    }
    if (!barrier) {
        attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    }
    if (pd->typing == SP_TY_LIST) {
        if (op->n_operands > 0) {
            put(p, " : ");
            type_list(p, op->operands, op->n_operands);
        }
        return true;
    }
    put(p, " : ");
    if (pd->typing == SP_TY_SELECT) {
        uint32_t t = p->m->values[op->first_result].type;
        if (p->m->values[op->operands[1]].type == t && p->m->values[op->operands[2]].type == t) {
            type_ref(p, p->m->values[op->operands[0]].type);
            put(p, ", ");
            type_ref(p, t);
            return true;
        }
        functional(p, op);
        return true;
    }
    if (pd->typing == SP_TY_SAME && all_same_type(p, op)) {
        type_ref(p, p->m->values[op->first_result].type);
    } else {
        functional(p, op);
    }
    return true;
}

static const sp_attr *get(const sp_op *op, const char *name)
{
    return sp_attrs_get(op->attrs, op->n_attrs, name);
}

static bool constant_op(pr *p, const sp_op *op)
{
    const sp_attr *v = get(op, "value");
    if (v == NULL || v->kind != SP_ATTR_DENSE || op->n_results != 1 || op->n_operands != 0) {
        return false;
    }
    if (v->u.dense.type != p->m->values[op->first_result].type) {
        /* e.g. a quantized result: `stablehlo.constant() <{value = ...}> : () -> T` */
        if (op->kind != SP_OP_CONSTANT) {
            return false;
        }
        results_prefix(p, op);
        generic_ex(p, op, false);
        return true;
    }
    results_prefix(p, op);
    put(p, op->name);
    static const char *const skip[] = {"value", NULL};
    attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    putc_(p, ' ');
    attr(p, v);
    return true;
}

static bool compare_op(pr *p, const sp_op *op)
{
    const sp_attr *d = get(op, "comparison_direction");
    const sp_attr *t = get(op, "compare_type");
    if (d == NULL || d->kind != SP_ATTR_ENUM || (t != NULL && t->kind != SP_ATTR_ENUM) ||
        op->n_results != 1) {
        return false;
    }
    results_prefix(p, op);
    put(p, op->name);
    /* StableHLO prints its direction after two spaces, MHLO after one */
    put(p, strncmp(op->name, "mhlo.", 5) == 0 ? " " : "  ");
    put(p, d->u.enm.value);
    put(p, ", ");
    operands(p, op, 0);
    if (t != NULL) {
        put(p, ",  ");
        put(p, t->u.enm.value);
    }
    static const char *const skip[] = {"comparison_direction", "compare_type", NULL};
    return tail_functional(p, op, skip);
}

static bool slice_op(pr *p, const sp_op *op)
{
    const sp_attr *s = get(op, "start_indices"), *l = get(op, "limit_indices"),
                  *st = get(op, "strides");
    if (s == NULL || l == NULL || s->kind != SP_ATTR_DENSE_ARRAY || l->kind != SP_ATTR_DENSE_ARRAY ||
        (st != NULL && (st->kind != SP_ATTR_DENSE_ARRAY || st->u.darr.n != s->u.darr.n)) ||
        s->u.darr.n != l->u.darr.n || op->n_operands != 1 || op->n_results != 1) {
        return false;
    }
    results_prefix(p, op);
    put(p, "stablehlo.slice ");
    operands(p, op, 0);
    put(p, " [");
    for (uint32_t i = 0; i < s->u.darr.n; i++) {
        put(p, i ? ", " : "");
        cm_buf_put_i64(p->b, s->u.darr.v[i]);
        putc_(p, ':');
        cm_buf_put_i64(p->b, l->u.darr.v[i]);
        if (st != NULL && st->u.darr.v[i] != 1) {
            putc_(p, ':');
            cm_buf_put_i64(p->b, st->u.darr.v[i]);
        }
    }
    putc_(p, ']');
    static const char *const skip[] = {"start_indices", "limit_indices", "strides", NULL};
    return tail_functional(p, op, skip);
}

static bool custom_call_op(pr *p, const sp_op *op)
{
    const sp_attr *t = get(op, "call_target_name");
    if (t == NULL || t->kind != SP_ATTR_STRING) {
        return false;
    }
    results_prefix(p, op);
    put(p, op->name); /* stablehlo. or mhlo. */
    putc_(p, ' ');
    symbol(p, t->u.str.s);
    putc_(p, '(');
    operands(p, op, 0);
    putc_(p, ')');
    static const char *const skip[] = {"call_target_name", NULL};
    return tail_functional(p, op, skip);
}

static bool convolution_op(pr *p, const sp_op *op)
{
    const sp_attr *d = get(op, "dimension_numbers");
    if (d == NULL || d->kind != SP_ATTR_PARAMS || strcmp(d->u.params.name, "stablehlo.conv") != 0 ||
        op->n_results != 1) {
        return false;
    }
    /* the compact dims must be printable; try into a side buffer */
    cm_buf tmp;
    cm_buf_init(&tmp);
    pr q = *p;
    q.b = &tmp;
    bool ok = conv_compact(&q, d);
    if (!ok) {
        cm_buf_fini(&tmp);
        return false;
    }
    static const char *const wnames[5] = {"window_strides", "padding", "lhs_dilation",
                                          "rhs_dilation", "window_reversal"};
    static const char *const wkeys[5] = {"stride", "pad", "lhs_dilate", "rhs_dilate", "reverse"};
    for (int i = 0; i < 5; i++) {
        const sp_attr *a = get(op, wnames[i]);
        if (a == NULL) {
            continue;
        }
        if (i == 1 ? (a->kind != SP_ATTR_DENSE || a->u.dense.ints == NULL || a->u.dense.n_ints % 2 != 0)
                   : a->kind != SP_ATTR_DENSE_ARRAY) {
            cm_buf_fini(&tmp);
            return false;
        }
    }
    results_prefix(p, op);
    put(p, "stablehlo.convolution(");
    operands(p, op, 0);
    put(p, ") dim_numbers = ");
    putn(p, tmp.data != NULL ? tmp.data : "", tmp.len);
    cm_buf_fini(&tmp);
    bool any = false;
    for (int i = 0; i < 5; i++) {
        const sp_attr *a = get(op, wnames[i]);
        if (a == NULL) {
            continue;
        }
        put(p, any ? ", " : ", window = {");
        any = true;
        put(p, wkeys[i]);
        put(p, " = ");
        if (i == 1) {
            putc_(p, '[');
            for (uint32_t k = 0; k + 1 < a->u.dense.n_ints; k += 2) {
                put(p, k ? ", " : "");
                int_array(p, a->u.dense.ints + k, 2);
            }
            putc_(p, ']');
        } else if (i == 4) {
            putc_(p, '[');
            for (uint32_t k = 0; k < a->u.darr.n; k++) {
                put(p, k ? ", " : "");
                put(p, a->u.darr.v[k] ? "true" : "false");
            }
            putc_(p, ']');
        } else {
            int_array(p, a->u.darr.v, a->u.darr.n);
        }
    }
    if (any) {
        putc_(p, '}');
    }
    static const char *const skip[] = {"dimension_numbers", "window_strides", "padding",
                                       "lhs_dilation",      "rhs_dilation",   "window_reversal",
                                       NULL};
    return tail_functional(p, op, skip);
}

static bool reduce_op(pr *p, const sp_op *op)
{
    const sp_attr *dims = get(op, "dimensions");
    if (dims == NULL || dims->kind != SP_ATTR_DENSE_ARRAY || op->n_regions != 1 ||
        op->regions[0].n_blocks != 1 || op->n_operands % 2 != 0 || op->n_operands == 0) {
        return false;
    }
    uint32_t n = op->n_operands / 2;
    const sp_block *bl = &p->m->blocks[op->regions[0].blocks[0]];
    if (bl->n_args != 2 * n) {
        return false;
    }
    /* compact form: one input, body = binop(arg0, arg1); return */
    const sp_op *inner = NULL;
    if (n == 1 && bl->n_ops == 2) {
        const sp_op *a = &p->m->ops[bl->ops[0]], *r = &p->m->ops[bl->ops[1]];
        /* StableHLO's conditions: a commutative binary op on the two block
         * arguments, returned; the arguments are 0-d tensors of the first
         * input's element type (the parser rebuilds them that way) */
        sp_op_kind k = (sp_op_kind)a->kind;
        bool commutative = k == SP_OP_ADD || k == SP_OP_MULTIPLY || k == SP_OP_MAXIMUM ||
                           k == SP_OP_MINIMUM || k == SP_OP_AND || k == SP_OP_OR || k == SP_OP_XOR;
        const sp_type *in = &p->m->types[p->m->values[op->operands[0]].type];
        const sp_type *at = &p->m->types[p->m->values[bl->first_arg].type];
        bool scalar = in->kind == SP_TYPE_TENSOR && in->elem != SP_ELEM_OTHER &&
                      at->kind == SP_TYPE_TENSOR && at->rank == 0 && at->elem == in->elem &&
                      at->encoding == NULL &&
                      p->m->values[bl->first_arg + 1].type == p->m->values[bl->first_arg].type;
        if (commutative && scalar && a->n_operands == 2 && a->operands[0] == bl->first_arg &&
            a->operands[1] == bl->first_arg + 1 && a->n_results == 1 && a->n_regions == 0 &&
            a->n_attrs == 0 && r->kind == SP_OP_RETURN && r->n_operands == 1 &&
            r->operands[0] == a->first_result && r->n_attrs == 0 &&
            p->m->values[a->first_result].type == p->m->values[bl->first_arg].type) {
            inner = a;
        }
    }
    results_prefix(p, op);
    put(p, "stablehlo.reduce");
    for (uint32_t i = 0; i < n; i++) {
        put(p, i ? ", (" : "(");
        value_ref(p, op->operands[i], true);
        put(p, " init: ");
        value_ref(p, op->operands[n + i], true);
        putc_(p, ')');
    }
    if (inner != NULL) {
        put(p, " applies ");
        put(p, inner->name);
    }
    put(p, " across dimensions = ");
    int_array(p, dims->u.darr.v, dims->u.darr.n);
    static const char *const skip[] = {"dimensions", NULL};
    attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    put(p, " : ");
    functional(p, op);
    if (inner != NULL) {
        return true;
    }
    newline(p);
    put(p, " reducer");
    for (uint32_t i = 0; i < n; i++) {
        put(p, "(");
        value_ref(p, bl->first_arg + i, false);
        put(p, ": ");
        type_ref(p, p->m->values[bl->first_arg + i].type);
        put(p, ", ");
        value_ref(p, bl->first_arg + n + i, false);
        put(p, ": ");
        type_ref(p, p->m->values[bl->first_arg + n + i].type);
        put(p, ") ");
    }
    putc_(p, ' ');
    putc_(p, '{');
    p->indent++;
    block_body(p, bl);
    p->indent--;
    newline(p);
    putc_(p, '}');
    return true;
}

static bool while_op(pr *p, const sp_op *op)
{
    if (op->n_regions != 2 || op->regions[0].n_blocks != 1 || op->regions[1].n_blocks != 1) {
        return false;
    }
    const sp_block *c = &p->m->blocks[op->regions[0].blocks[0]];
    const sp_block *d = &p->m->blocks[op->regions[1].blocks[0]];
    if (c->n_args != op->n_operands || d->n_args != op->n_operands) {
        return false;
    }
    results_prefix(p, op);
    put(p, op->name);
    putc_(p, '(');
    for (uint32_t i = 0; i < op->n_operands; i++) {
        put(p, i ? ", " : "");
        value_ref(p, c->first_arg + i, false);
        put(p, " = ");
        value_ref(p, op->operands[i], true);
    }
    putc_(p, ')');
    if (op->n_operands > 0) {
        put(p, " : ");
        type_list(p, op->operands, op->n_operands);
    }
    if (op->n_attrs > 0) {
        put(p, " attributes");
        attr_dict(p, op->attrs, op->n_attrs, NULL, 0, true);
    }
    newline(p);
    put(p, " cond ");
    /* the body block args share names with cond's: alias them */
    for (uint32_t i = 0; i < d->n_args; i++) {
        p->names[d->first_arg + i] = p->names[c->first_arg + i];
    }
    sp_region rc = op->regions[0], rd_ = op->regions[1];
    region(p, &rc, false);
    put(p, " do ");
    region(p, &rd_, false);
    return true;
}

static void func_results(pr *p, const sp_type *ft, const sp_attr *res_attrs)
{
    bool any_attr = false;
    if (res_attrs != NULL && res_attrs->kind == SP_ATTR_ARRAY) {
        for (uint32_t i = 0; i < res_attrs->u.arr.n; i++) {
            if (res_attrs->u.arr.items[i]->kind == SP_ATTR_DICT && res_attrs->u.arr.items[i]->u.dict.n > 0) {
                any_attr = true;
            }
        }
    }
    if (ft->n_results == 0) {
        return;
    }
    put(p, " -> ");
    bool paren = ft->n_results > 1 || any_attr || p->m->types[ft->results[0]].kind == SP_TYPE_FUNC;
    if (paren) {
        putc_(p, '(');
    }
    for (uint32_t i = 0; i < ft->n_results; i++) {
        put(p, i ? ", " : "");
        type_ref(p, ft->results[i]);
        if (any_attr && i < res_attrs->u.arr.n && res_attrs->u.arr.items[i]->kind == SP_ATTR_DICT) {
            const sp_attr *d = res_attrs->u.arr.items[i];
            attr_dict(p, d->u.dict.items, d->u.dict.n, NULL, 0, true);
        }
    }
    if (paren) {
        putc_(p, ')');
    }
}

static bool func_op(pr *p, const sp_op *op)
{
    const sp_attr *name = get(op, "sym_name"), *ft = get(op, "function_type");
    if (name == NULL || name->kind != SP_ATTR_STRING || ft == NULL || ft->kind != SP_ATTR_TYPE ||
        p->m->types[ft->u.type].kind != SP_TYPE_FUNC || op->n_regions > 1) {
        return false;
    }
    const sp_type *t = &p->m->types[ft->u.type];
    const sp_block *entry = NULL;
    if (op->n_regions == 1 && op->regions[0].n_blocks > 0) {
        entry = &p->m->blocks[op->regions[0].blocks[0]];
        if (entry->n_args != t->n_inputs) {
            return false;
        }
        for (uint32_t i = 0; i < t->n_inputs; i++) {
            if (p->m->values[entry->first_arg + i].type != t->inputs[i]) {
                return false; /* the custom form could not say both */
            }
        }
    }
    const sp_attr *args = get(op, "arg_attrs"), *res = get(op, "res_attrs"), *vis = get(op, "sym_visibility");
    if ((args != NULL && args->kind != SP_ATTR_ARRAY) || (res != NULL && res->kind != SP_ATTR_ARRAY) ||
        (vis != NULL && vis->kind != SP_ATTR_STRING)) {
        return false;
    }
    put(p, "func.func ");
    if (vis != NULL) {
        put(p, vis->u.str.s);
        putc_(p, ' ');
    }
    symbol(p, name->u.str.s);
    putc_(p, '(');
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        put(p, i ? ", " : "");
        if (entry != NULL) {
            value_ref(p, entry->first_arg + i, false);
            put(p, ": ");
        }
        type_ref(p, t->inputs[i]);
        if (args != NULL && i < args->u.arr.n && args->u.arr.items[i]->kind == SP_ATTR_DICT) {
            const sp_attr *d = args->u.arr.items[i];
            attr_dict(p, d->u.dict.items, d->u.dict.n, NULL, 0, true);
        }
        if (p->o != NULL && p->o->debug_info && entry != NULL && entry->arg_locs != NULL &&
            entry->arg_locs[i] != NULL) {
            put(p, " loc(");
            put(p, entry->arg_locs[i]);
            putc_(p, ')');
        }
    }
    putc_(p, ')');
    func_results(p, t, res);
    static const char *const skip[] = {"sym_name", "function_type", "arg_attrs", "res_attrs",
                                       "sym_visibility", NULL};
    uint32_t extra = 0;
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        bool s = false;
        for (int k = 0; skip[k] != NULL; k++) {
            s = s || strcmp(skip[k], op->attrs[i].name) == 0;
        }
        extra += s ? 0 : 1;
    }
    if (extra > 0) {
        put(p, " attributes");
        attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    }
    if (op->n_regions == 1) {
        putc_(p, ' ');
        region(p, &op->regions[0], false);
    }
    return true;
}

static bool call_op(pr *p, const sp_op *op)
{
    const sp_attr *c = get(op, "callee");
    if (c == NULL || c->kind != SP_ATTR_SYMBOL) {
        return false;
    }
    results_prefix(p, op);
    /* MLIR drops the func dialect prefix only where func is the default
     * dialect: directly in a func.func body. */
    uint32_t owner =
        op->parent_block == SP_NONE ? SP_NONE : p->m->blocks[op->parent_block].parent_op;
    bool in_func = owner == SP_NONE || p->m->ops[owner].kind == SP_OP_FUNC_FUNC;
    put(p, in_func ? "call " : "func.call ");
    symbol(p, c->u.sym);
    putc_(p, '(');
    operands(p, op, 0);
    putc_(p, ')');
    static const char *const skip[] = {"callee", NULL};
    return tail_functional(p, op, skip);
}

/* `T` when operand 0 and the only result have type T (sdy ops print `: T`). */
static bool same_type_1(const pr *p, const sp_op *op)
{
    return op->n_operands == 1 && op->n_results == 1 &&
           p->m->values[op->operands[0]].type == p->m->values[op->first_result].type;
}

/* sdy.all_gather [{"x"}, {}] %v out_sharding=<...> : T and the other collectives. */
static bool collective_op(pr *p, const sp_op *op)
{
    const char *axes_name = NULL;
    sp_attr_kind want = SP_ATTR_AXIS_LISTS;
    switch (op->kind) {
    case SP_OP_SDY_ALL_GATHER:
        axes_name = "gathering_axes";
        break;
    case SP_OP_SDY_ALL_SLICE:
        axes_name = "slicing_axes";
        break;
    case SP_OP_SDY_REDUCE_SCATTER:
        axes_name = "reduce_scatter_axes";
        break;
    case SP_OP_SDY_SHARDED_TO_UNREDUCED:
        axes_name = "axes";
        break;
    case SP_OP_SDY_ALL_REDUCE:
        axes_name = "reduction_axes";
        want = SP_ATTR_AXIS_LIST;
        break;
    case SP_OP_SDY_REPLICATED_TO_UNREDUCED:
        axes_name = "axes";
        want = SP_ATTR_AXIS_LIST;
        break;
    case SP_OP_SDY_ALL_TO_ALL:
        axes_name = "params";
        want = SP_ATTR_ALL_TO_ALL;
        break;
    default:
        break;
    }
    const sp_attr *axes = axes_name != NULL ? get(op, axes_name) : NULL;
    const sp_attr *os = get(op, "out_sharding"), *red = get(op, "reduction_op");
    if ((axes_name != NULL && (axes == NULL || axes->kind != want)) || os == NULL ||
        os->kind != SP_ATTR_SHARDING || (red != NULL && red->kind != SP_ATTR_ENUM) ||
        !same_type_1(p, op)) {
        return false;
    }
    results_prefix(p, op);
    put(p, op->name);
    if (red != NULL) { /* `sdy.all_reduce max {"x"} ...` (Shardy reads `<max>` too) */
        putc_(p, ' ');
        put(p, red->u.enm.value);
    }
    if (axes != NULL) {
        putc_(p, ' ');
        if (want == SP_ATTR_AXIS_LIST) {
            axis_list(p, &axes->u.axes);
        } else {
            axis_lists(p, axes);
        }
    }
    putc_(p, ' ');
    operands(p, op, 0);
    put(p, " out_sharding=");
    sp_sharding_print(os->u.sharding, p->b);
    const char *const skip[] = {"out_sharding", "reduction_op", axes_name, NULL};
    return tail_type(p, op, skip, p->m->values[op->first_result].type);
}

/* `[<@m, [...]>, ...]`, the stripped form of a sharding-per-value list. */
static void stripped_shardings(pr *p, const sp_attr *a)
{
    putc_(p, '[');
    for (uint32_t i = 0; i < a->u.shardings.n; i++) {
        if (i > 0) {
            put(p, ", ");
        }
        sp_sharding_print(a->u.shardings.items[i], p->b);
    }
    putc_(p, ']');
}

/* sdy.manual_computation / sdy.named_computation: a single-block region
 * written `(%arg1: T, ...) { ... }`. */
static bool sdy_region_op(pr *p, const sp_op *op)
{
    bool named = op->kind == SP_OP_SDY_NAMED_COMPUTATION;
    const sp_attr *name = get(op, "name"), *in = get(op, "in_shardings"),
                  *out = get(op, "out_shardings"), *axes = get(op, "manual_axes");
    if (op->n_regions != 1 || op->regions[0].n_blocks != 1 ||
        (named && (name == NULL || name->kind != SP_ATTR_STRING)) ||
        (in != NULL && in->kind != SP_ATTR_SHARDING_LIST) ||
        (out != NULL && out->kind != SP_ATTR_SHARDING_LIST) ||
        (!named && (in == NULL || out == NULL || axes == NULL || axes->kind != SP_ATTR_AXIS_LIST))) {
        return false;
    }
    const sp_block *bl = &p->m->blocks[op->regions[0].blocks[0]];
    results_prefix(p, op);
    put(p, op->name);
    if (named) {
        putc_(p, '<');
        sp_mlir_print_string(p->b, name->u.str.s, name->u.str.len);
        putc_(p, '>');
    }
    putc_(p, '(');
    operands(p, op, 0);
    putc_(p, ')');
    if (in != NULL) {
        put(p, " in_shardings=");
        stripped_shardings(p, in);
    }
    if (out != NULL) {
        put(p, " out_shardings=");
        stripped_shardings(p, out);
    }
    if (!named) {
        put(p, " manual_axes=");
        axis_list(p, &axes->u.axes);
    }
    put(p, " (");
    for (uint32_t i = 0; i < bl->n_args; i++) {
        put(p, i ? ", " : "");
        value_ref(p, bl->first_arg + i, false);
        put(p, ": ");
        type_ref(p, p->m->values[bl->first_arg + i].type);
    }
    put(p, ") {");
    p->indent++;
    block_body(p, bl);
    p->indent--;
    newline(p);
    putc_(p, '}');
    static const char *const skip[] = {"name", "in_shardings", "out_shardings", "manual_axes", NULL};
    return tail_functional(p, op, skip);
}

/* arith.constant attr-dict VALUE */
static bool arith_constant_op(pr *p, const sp_op *op)
{
    const sp_attr *v = get(op, "value");
    if (v == NULL || op->n_results != 1 || op->n_operands != 0) {
        return false;
    }
    results_prefix(p, op);
    put(p, "arith.constant");
    static const char *const skip[] = {"value", NULL};
    attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    putc_(p, ' ');
    attr(p, v);
    return true;
}

/* tensor.cast %x attr-dict : T to U */
static bool cast_op(pr *p, const sp_op *op)
{
    if (op->n_operands != 1 || op->n_results != 1) {
        return false;
    }
    results_prefix(p, op);
    put(p, "tensor.cast ");
    operands(p, op, 0);
    attr_dict(p, op->attrs, op->n_attrs, NULL, 0, true);
    put(p, " : ");
    type_ref(p, p->m->values[op->operands[0]].type);
    put(p, " to ");
    type_ref(p, p->m->values[op->first_result].type);
    return true;
}

/* stablehlo.tuple %a, %b attr-dict : tuple<A, B> */
static bool tuple_op(pr *p, const sp_op *op)
{
    if (op->n_results != 1) {
        return false;
    }
    /* the result type must be tuple<operand types> */
    const sp_type *t = &p->m->types[p->m->values[op->first_result].type];
    const char *q = t->text;
    if (strncmp(q, "tuple<", 6) != 0) {
        return false;
    }
    q += 6;
    for (uint32_t i = 0; i < op->n_operands; i++) {
        const sp_type *ot = &p->m->types[p->m->values[op->operands[i]].type];
        if (i > 0) {
            if (strncmp(q, ", ", 2) != 0) {
                return false;
            }
            q += 2;
        }
        if (strncmp(q, ot->text, ot->text_len) != 0) {
            return false;
        }
        q += ot->text_len;
    }
    if (strcmp(q, ">") != 0) {
        return false;
    }
    results_prefix(p, op);
    put(p, "stablehlo.tuple");
    if (op->n_operands > 0) {
        putc_(p, ' ');
        operands(p, op, 0);
    }
    return tail_type(p, op, NULL, p->m->values[op->first_result].type);
}

/* stablehlo.get_tuple_element %t[0] attr-dict : (tuple<...>) -> T */
static bool get_tuple_element_op(pr *p, const sp_op *op)
{
    const sp_attr *i = get(op, "index");
    if (i == NULL || i->kind != SP_ATTR_INT || op->n_operands != 1 || op->n_results != 1) {
        return false;
    }
    results_prefix(p, op);
    put(p, "stablehlo.get_tuple_element ");
    operands(p, op, 0);
    putc_(p, '[');
    cm_buf_put_i64(p->b, i->u.i.v);
    putc_(p, ']');
    static const char *const skip[] = {"index", NULL};
    return tail_functional(p, op, skip);
}

/* stablehlo.composite "name" %a attr-dict : (Ts) -> Rs */
static bool composite_op(pr *p, const sp_op *op)
{
    const sp_attr *n = get(op, "name");
    if (n == NULL || n->kind != SP_ATTR_STRING) {
        return false;
    }
    results_prefix(p, op);
    put(p, "stablehlo.composite ");
    sp_mlir_print_string(p->b, n->u.str.s, n->u.str.len);
    if (op->n_operands > 0) {
        putc_(p, ' ');
        operands(p, op, 0);
    }
    static const char *const skip[] = {"name", NULL};
    return tail_functional(p, op, skip);
}

/* sdy.mesh @name = <...> attr-dict */
static bool mesh_op(pr *p, const sp_op *op)
{
    const sp_attr *n = get(op, "sym_name"), *m = get(op, "mesh");
    if (n == NULL || n->kind != SP_ATTR_STRING || m == NULL || m->kind != SP_ATTR_MESH) {
        return false;
    }
    put(p, "sdy.mesh ");
    symbol(p, n->u.str.s);
    put(p, " = ");
    sp_mesh_print(m->u.mesh, p->b);
    static const char *const skip[] = {"sym_name", "mesh", NULL};
    attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    return true;
}

static bool sdy_op(pr *p, const sp_op *op)
{
    switch (op->kind) {
    case SP_OP_SDY_SHARDING_CONSTRAINT:
    case SP_OP_SDY_RESHARD: {
        const sp_attr *s = get(op, "sharding");
        if (s == NULL || s->kind != SP_ATTR_SHARDING || op->n_operands != 1 || op->n_results != 1) {
            return false;
        }
        results_prefix(p, op);
        put(p, op->name);
        putc_(p, ' ');
        operands(p, op, 0);
        putc_(p, ' ');
        sp_sharding_print(s->u.sharding, p->b);
        static const char *const skip[] = {"sharding", NULL};
        return tail_type(p, op, skip, p->m->values[op->first_result].type);
    }
    case SP_OP_SDY_PROPAGATION_BARRIER: {
        const sp_attr *d = get(op, "allowed_direction");
        if (d == NULL || d->kind != SP_ATTR_ENUM || op->n_operands != 1 || op->n_results != 1) {
            return false;
        }
        results_prefix(p, op);
        put(p, "sdy.propagation_barrier ");
        operands(p, op, 0);
        put(p, " allowed_direction=");
        put(p, d->u.enm.value);
        static const char *const skip[] = {"allowed_direction", NULL};
        return tail_type(p, op, skip, p->m->values[op->first_result].type);
    }
    case SP_OP_SDY_SHARDING_GROUP: {
        const sp_attr *g = get(op, "group_id");
        if (g == NULL || g->kind != SP_ATTR_INT || op->n_operands != 1 || op->n_results != 0) {
            return false;
        }
        put(p, "sdy.sharding_group ");
        operands(p, op, 0);
        put(p, " group_id=");
        cm_buf_put_i64(p->b, g->u.i.v);
        static const char *const skip[] = {"group_id", NULL};
        return tail_type(p, op, skip, p->m->values[op->operands[0]].type);
    }
    case SP_OP_SDY_CONSTANT:
        return constant_op(p, op);
    case SP_OP_SDY_ALL_GATHER:
    case SP_OP_SDY_ALL_SLICE:
    case SP_OP_SDY_ALL_REDUCE:
    case SP_OP_SDY_ALL_TO_ALL:
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
    case SP_OP_SDY_REDUCE_SCATTER:
    case SP_OP_SDY_REPLICATED_TO_UNREDUCED:
    case SP_OP_SDY_SHARDED_TO_UNREDUCED:
        return collective_op(p, op);
    case SP_OP_SDY_DATA_FLOW_EDGE:
    case SP_OP_SDY_FUNC_DATA_FLOW_EDGE: {
        const sp_attr *s = get(op, "sharding");
        if (!same_type_1(p, op) || (s != NULL && (s->kind != SP_ATTR_SHARDING ||
                                                   op->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE))) {
            return false;
        }
        results_prefix(p, op);
        put(p, op->name);
        putc_(p, ' ');
        operands(p, op, 0);
        if (s != NULL) {
            put(p, " sharding=");
            sp_sharding_print(s->u.sharding, p->b);
        }
        static const char *const skip[] = {"sharding", NULL};
        return tail_type(p, op, skip, p->m->values[op->first_result].type);
    }
    case SP_OP_SDY_MANUAL_COMPUTATION:
    case SP_OP_SDY_NAMED_COMPUTATION:
        return sdy_region_op(p, op);
    default:
        return false;
    }
}

/* `return %a, %b : A, B` (func.return and sdy.return read alike). */
static bool func_return_op(pr *p, const sp_op *op)
{
    if (op->n_results != 0) {
        return false;
    }
    /* `return {attrs} %a : A`: func.return's and sdy.return's attr-dict
     * comes before the operands */
    put(p, op->kind == SP_OP_FUNC_RETURN ? "return" : op->name);
    attr_dict(p, op->attrs, op->n_attrs, NULL, 0, true);
    if (op->n_operands > 0) {
        putc_(p, ' ');
        operands(p, op, 0);
        put(p, " : ");
        type_list(p, op->operands, op->n_operands);
    }
    return true;
}

/* chlo.NAME %a[, %b] attr-dict : A[, B] -> R, and
 * chlo.top_k(%a, k = K[, is_stable = B]) attr-dict : A -> (V, I). */
static bool chlo_op(pr *p, const sp_op *op)
{
    if (op->n_operands == 0 || op->n_results == 0) {
        return false;
    }
    static const char *const skip[] = {"k", "is_stable", NULL};
    bool topk = op->kind == SP_OP_CHLO_TOP_K;
    const sp_attr *k = topk ? sp_attrs_get(op->attrs, op->n_attrs, "k") : NULL;
    const sp_attr *st = topk ? sp_attrs_get(op->attrs, op->n_attrs, "is_stable") : NULL;
    if (topk && (op->n_operands != 1 || op->n_results != 2 || k == NULL ||
                 k->kind != SP_ATTR_INT || (st != NULL && st->kind != SP_ATTR_BOOL))) {
        return false;
    }
    if (!topk && op->n_results != 1) {
        return false;
    }
    results_prefix(p, op);
    put(p, op->name);
    if (topk) {
        putc_(p, '(');
        operands(p, op, 0);
        put(p, ", k = ");
        cm_buf_put_i64(p->b, k->u.i.v);
        if (st != NULL) {
            put(p, st->u.b ? ", is_stable = true" : ", is_stable = false");
        }
        putc_(p, ')');
    } else {
        putc_(p, ' ');
        operands(p, op, 0);
    }
    attr_dict(p, op->attrs, op->n_attrs, topk ? skip : NULL, 0, true);
    put(p, " : ");
    type_list(p, op->operands, op->n_operands);
    put(p, " -> ");
    if (op->n_results > 1) {
        putc_(p, '(');
    }
    result_type_list(p, op);
    if (op->n_results > 1) {
        putc_(p, ')');
    }
    return true;
}

/* stablehlo.complex %a, %b attr-dict : R when both operands have R's real
 * counterpart type, else : (A, B) -> R. */
static bool complex_op(pr *p, const sp_op *op)
{
    if (op->n_operands != 2 || op->n_results != 1) {
        return false;
    }
    const sp_type *a = &p->m->types[p->m->values[op->operands[0]].type];
    const sp_type *r = &p->m->types[p->m->values[op->first_result].type];
    bool same = p->m->values[op->operands[0]].type == p->m->values[op->operands[1]].type &&
                a->kind == SP_TYPE_TENSOR && r->kind == SP_TYPE_TENSOR && a->encoding == NULL &&
                r->encoding == NULL && a->rank == r->rank &&
                ((a->elem == SP_ELEM_F32 && r->elem == SP_ELEM_C64) ||
                 (a->elem == SP_ELEM_F64 && r->elem == SP_ELEM_C128));
    for (uint32_t d = 0; same && d < a->rank; d++) {
        same = a->dims[d] == r->dims[d];
    }
    results_prefix(p, op);
    put(p, "stablehlo.complex ");
    operands(p, op, 0);
    attr_dict(p, op->attrs, op->n_attrs, NULL, 0, true);
    put(p, " : ");
    if (same) {
        type_ref(p, p->m->values[op->first_result].type);
    } else {
        functional(p, op);
    }
    return true;
}

/* The check and interpreter dialects' ops (sp_test_form, sp_mlir_int.h). */
static bool test_dialect_op(pr *p, const sp_op *op, const sp_test_form *f)
{
    if (op->n_operands != f->n_operands || op->n_results != (f->result ? 1u : 0u) ||
        op->n_regions != 0) {
        return false;
    }
    if (f->result && p->m->values[op->first_result].type != p->m->values[op->operands[0]].type) {
        return false;
    }
    if (f->n_types == 1 && op->n_operands == 2 &&
        p->m->values[op->operands[0]].type != p->m->values[op->operands[1]].type) {
        return false;
    }
    const char *skip[4] = {NULL, NULL, NULL, NULL};
    uint32_t ns = 0;
    const sp_attr *value = NULL;
    if (f->value) {
        value = sp_attrs_get(op->attrs, op->n_attrs, "value");
        if (value == NULL || value->kind != SP_ATTR_DENSE) {
            return false;
        }
        skip[ns++] = "value";
    }
    const sp_attr *args[2] = {NULL, NULL};
    for (int k = 0; k < 2 && f->args[k].key != NULL; k++) {
        const sp_test_kwarg *ka = &f->args[k];
        args[k] = sp_attrs_get(op->attrs, op->n_attrs, ka->attr);
        if (args[k] == NULL && !ka->optional) {
            return false;
        }
        if (args[k] != NULL &&
            !((ka->kind == 's' && args[k]->kind == SP_ATTR_STRING) ||
              (ka->kind == 'i' && args[k]->kind == SP_ATTR_INT && args[k]->u.i.v >= 0) ||
              (ka->kind == 'f' && args[k]->kind == SP_ATTR_FLOAT))) {
            return false;
        }
        skip[ns++] = ka->attr;
    }
    results_prefix(p, op);
    put(p, op->name);
    putc_(p, ' ');
    operands(p, op, 0);
    if (value != NULL) {
        put(p, ", ");
        attr(p, value);
    }
    for (int k = 0; k < 2 && f->args[k].key != NULL; k++) {
        const sp_attr *a = args[k];
        if (a == NULL) {
            continue;
        }
        put(p, ", ");
        put(p, f->args[k].key);
        put(p, " = ");
        if (a->kind == SP_ATTR_STRING) {
            sp_mlir_print_string(p->b, a->u.str.s, a->u.str.len);
        } else if (a->kind == SP_ATTR_INT) {
            cm_buf_put_i64(p->b, a->u.i.v);
        } else {
            sp_mlir_print_float(p->b, a->u.f.v, a->u.f.lit, "f64");
        }
    }
    if (!f->dict_after_colon) {
        attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
    }
    if (f->n_types > 0) {
        put(p, " :");
        if (f->dict_after_colon) {
            attr_dict(p, op->attrs, op->n_attrs, skip, 0, true);
        }
        putc_(p, ' ');
        type_list(p, op->operands, f->n_types);
    }
    return true;
}

/* Ops of other dialects whose custom form the reference tests use. */
static bool other_dialect_op(pr *p, const sp_op *op)
{
    const sp_test_form *f = sp_mlir_test_form(op->name, strlen(op->name));
    if (f != NULL) {
        return !p->no_test_dialects && test_dialect_op(p, op, f);
    }
    if (strcmp(op->name, "arith.constant") == 0) {
        return arith_constant_op(p, op);
    }
    if (strcmp(op->name, "tensor.cast") == 0) {
        return cast_op(p, op);
    }
    return false;
}

/* The printers of the custom forms the keyword table (sp_mlir_pretty) does
 * not describe, by op kind, and of the other dialects' ops; sdy ops without
 * an entry go to sdy_op. Each returns false to fall back to the generic
 * form. */
typedef bool custom_printer(pr *p, const sp_op *op);
#define CUSTOM_PRINTER_(kind, fn) [kind] = fn,
static custom_printer *const custom_printers[SP_OP_COUNT_] = {
    [SP_OP_UNKNOWN] = other_dialect_op, SP_MLIR_CUSTOM_FORMS(CUSTOM_PRINTER_)};
#undef CUSTOM_PRINTER_

static void print_op(pr *p, uint32_t opid)
{
    const sp_op *op = &p->m->ops[opid];
    size_t mark = p->b->len;
    bool done = false;
    if (p->o == NULL || !p->o->generic) {
        const sp_pretty *pd = sp_mlir_pretty((sp_op_kind)op->kind);
        custom_printer *f = op->kind < SP_OP_COUNT_ ? custom_printers[op->kind] : NULL;
        if (pd != NULL) {
            done = keyword_op(p, op, pd);
        } else if (f != NULL) {
            done = f(p, op);
        } else if (strncmp(op->name, "sdy.", 4) == 0) {
            done = sdy_op(p, op);
        } else if (strncmp(op->name, "chlo.", 5) == 0 && op->kind != SP_OP_UNKNOWN) {
            done = chlo_op(p, op);
        }
    }
    if (!done) {
        /* a custom printer may have refused half-way: restart generically */
        p->b->len = mark;
        if (p->b->data != NULL) {
            p->b->data[mark] = '\0';
        }
        results_prefix(p, op);
        generic(p, op);
    }
    loc(p, op);
}

/* Names every value of p->m as MLIR's SSANameState does. */
static void number_module(pr *p)
{
    const sp_module *m = p->m;
    const sp_block *body = &m->blocks[m->body];
    /* top-level ops: each isolated op (func.func) numbers from zero */
    ctx top = {0, 0, 0, 0};
    number_block(p, &top, body, false);
    uint32_t top_used = p->n_used;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *op = &m->ops[body->ops[i]];
        ctx c = op->kind == SP_OP_FUNC_FUNC ? (ctx){0, 0, 0, top_used} : top;
        c.used_mark = top_used;
        number_regions(p, op, c);
    }
}

/* A printer of m into b, its values named; false (b->oom set) when out of
 * memory. */
static bool pr_open(pr *p, const sp_module *m, const sp_print_opts *opts, cm_buf *b)
{
    memset(p, 0, sizeof *p);
    p->m = m;
    p->o = opts;
    p->b = b;
    p->names = cm_calloc(m->n_values == 0 ? 1 : m->n_values, sizeof(vname));
    if (p->names == NULL) {
        b->oom = true;
        return false;
    }
    cm_arena_init(&p->scratch, 4096);
    number_module(p);
    return true;
}

static void pr_close(pr *p)
{
    cm_arena_fini(&p->scratch);
    cm_free(p->names);
    cm_free(p->used);
    cm_free(p->slots);
}

void sp_mlir_value_name(const sp_module *m, uint32_t v, cm_buf *b)
{
    pr p;
    if (!pr_open(&p, m, NULL, b)) {
        return;
    }
    if (v < m->n_values) {
        value_ref(&p, v, true);
    }
    pr_close(&p);
}

void sp_mlir_print_float_value(cm_buf *b, double v, sp_elem e)
{
    sp_mlir_print_float(b, v, NULL, sp_elem_name(e));
}

static void print_module(const sp_module *m, const sp_print_opts *opts, bool no_test_dialects,
                         cm_buf *b)
{
    /* about 64 bytes per op: saves most of the buffer's regrowth copies */
    size_t guess;
    if (cm_mul_size(m->n_ops, 64, &guess)) {
        cm_buf_reserve(b, guess);
    }
    pr p;
    if (!pr_open(&p, m, opts, b)) {
        return;
    }
    p.no_test_dialects = no_test_dialects;
    const sp_block *body = &m->blocks[m->body];
    /* attribute aliases first, as MLIR prints them; loc aliases go last */
    for (uint32_t i = 0; i < m->n_aliases; i++) {
        if (strncmp(m->aliases[i].text, "loc(", 4) != 0) {
            putc_(&p, '#');
            put(&p, m->aliases[i].name);
            put(&p, " = ");
            put(&p, m->aliases[i].text);
            putc_(&p, '\n');
        }
    }
    put(&p, "module");
    if (m->sym_name != NULL) {
        putc_(&p, ' ');
        symbol(&p, m->sym_name);
    }
    if (m->n_attrs > 0) {
        put(&p, " attributes");
        attr_dict(&p, m->attrs, m->n_attrs, NULL, 0, true);
    }
    put(&p, " {");
    p.indent = 1;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        newline(&p);
        print_op(&p, body->ops[i]);
    }
    p.indent = 0;
    newline(&p);
    putc_(&p, '}');
    if (opts != NULL && opts->debug_info && m->loc != NULL) {
        put(&p, " loc(");
        put(&p, m->loc);
        putc_(&p, ')');
    }
    putc_(&p, '\n');
    for (uint32_t i = 0; opts != NULL && opts->debug_info && i < m->n_aliases; i++) {
        if (strncmp(m->aliases[i].text, "loc(", 4) == 0) {
            putc_(&p, '#');
            put(&p, m->aliases[i].name);
            put(&p, " = ");
            put(&p, m->aliases[i].text);
            putc_(&p, '\n');
        }
    }
    pr_close(&p);
}

void sp_mlir_print(const sp_module *m, const sp_print_opts *opts, cm_buf *b)
{
    print_module(m, opts, false, b);
}

void sp_mlir_print_sdy_opt(const sp_module *m, const sp_print_opts *opts, cm_buf *b)
{
    print_module(m, opts, true, b);
}
