/* SPDX-License-Identifier: Apache-2.0
 * planner: `shardplan suggest` (sp_suggest.h, docs/advisor.md "Suggest"). The
 * input is read once (planner/doc/sp_input.h) and its unannotated values
 * listed, largest first, each by position (function number, top-level op
 * position, result) so that a value is found again in every fresh read.
 * Every candidate constraint is scored by a full run on its own module: the
 * input's MLIR text read again through the loader with the same options, the
 * constraint inserted as an sdy.sharding_constraint op after the value's
 * definition, the input's pass with its rules, -sdy-insert-explicit-reshards,
 * -sdy-reshard-to-collectives and sp_cost (explicit mode), exactly as lint
 * costs a module, on a pool of threads pulling jobs from an atomic counter.
 * A greedy search then adds, one at a time, the best further constraint on
 * another value while the objective improves.
 * Scoring inserts the constraint into the IR read for the run (constrain());
 * sp_suggest_apply, which makes the text a client or --check gets, uses
 * what-if's application of the contract's edits (sp_whatif_edit_text), and a
 * unit test checks that both cost the same.
 * TODO(#10): one IR-level edit application for both once what-if exports
 * one (sp_whatif_edit_text reads and prints the module: twice the reading
 * per candidate). */
#include "sp_suggest.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_advise_int.h"
#include "sp_whatif.h"
#include "sp_collectives.h"
#include "sp_graph_json.h"
#include "sp_ops.h"
#include "sp_pipeline.h"
#include "sp_profile_json.h"
#include "sp_reshard.h"
#include "sp_diag.h"
#include "sp_mlir.h"

#define MAX_EDITS SP_SUGGEST_MAX_EDITS /* constraints in one combination */
#define NEXT_POOL 8 /* further constraints tried at each greedy step */
#define MAX_K     SP_SUGGEST_MAX_K

bool sp_suggest_objective_parse(const char *name, sp_suggest_objective *out)
{
    if (strcmp(name, "time") == 0) {
        *out = SP_SUGGEST_TIME;
    } else if (strcmp(name, "memory") == 0) {
        *out = SP_SUGGEST_MEMORY;
    } else {
        return false;
    }
    return true;
}

const char *sp_suggest_objective_name(sp_suggest_objective o)
{
    return o == SP_SUGGEST_MEMORY ? "memory" : "time";
}

void sp_suggest_opts_init(sp_suggest_opts *o)
{
    memset(o, 0, sizeof *o);
    o->objective = SP_SUGGEST_TIME;
    o->k = 5;
    o->max_candidates = 48;
    o->max_edits = 3;
}

/* Where a value is, whatever its id in a given read: the function number
 * (func.func ops with a body, in module order, as in the plan document),
 * the position of the defining op in the function's block (SP_NONE for an
 * argument) and the result or argument number. */
typedef struct vpos {
    uint32_t func;
    uint32_t op;
    uint32_t index;
} vpos;

/* An unannotated value. Strings live in the sp_suggest's arena. */
typedef struct cval {
    vpos pos;
    double bytes; /* whole tensor */
    double local; /* per device, as the baseline propagates it */
    uint32_t vid; /* value id in the baseline's module (passes move ops, not ids) */
    uint32_t rank;
    const char *label;   /* "%arg0", "%name", "result 0 of /ops/5 (stablehlo.add)" */
    const char *token;   /* the name a fix uses: "%arg0", "%name" or "%v" */
    const char *op_name; /* "func.func" for arguments */
    uint32_t line;
    const char *loc;
    const char *json; /* the contract's VREF */
    const char *vref; /* its CLI form */
    const char *path; /* the op's path, NULL for an argument */
    const char *func; /* the function's name when not main, else NULL */
    sp_advise_target tgt; /* whom the JAX fix names */
} cval;

/* One constraint on one value, with its first-round score. */
typedef struct cand {
    uint32_t val;     /* index in vals */
    sp_sharding *s;   /* closed, on the main mesh (arena) */
    const char *text; /* Shardy text of s */
    bool ok;          /* scored */
    sp_suggest_figures f;
} cand;

typedef struct job {
    uint32_t edits[MAX_EDITS]; /* candidate indices */
    uint32_t n;
    bool ok;
    bool oom; /* the run ran out of memory: the search fails with CM_ENOMEM */
    sp_suggest_figures f;
} job;

typedef struct item {
    sp_suggestion pub;
    uint32_t edits[MAX_EDITS];
    sp_suggest_edit e[MAX_EDITS];
} item;

struct sp_suggest {
    cm_arena arena;
    sp_suggest_opts o;
    cm_cancel cancel; /* o's hook, for propagation inside a candidate */
    sp_profile profile;
    sp_input in;                   /* the input as read (owns g, the rules document) */
    sp_graph *g;                   /* in.g: graph input (names, custom rules), or NULL */
    const sp_custom_rules *custom; /* in.custom: the rules in force, may be NULL */
    sp_input_opts in_opts;         /* the caller's, rules and limits copied below */
    char *rules;                   /* copy of in_opts.rules (heap), or NULL */
    sp_graph_limits limits;        /* copy of *in_opts.limits */
    sp_input_opts run_opts;        /* every run's read: MLIR, no propagation, no rules */
    char *text;                    /* MLIR every run reads (heap) */
    size_t text_len;
    char *input; /* the input as given (heap; text for MLIR) */
    size_t input_len;
    bool functions_form; /* op paths /functions/F/ops/I */
    const char *mesh;    /* main mesh name (arena), NULL without a mesh */
    cval *vals;          /* heap, largest first */
    uint32_t n_vals;
    cand *cands; /* heap, first-round candidates */
    uint32_t n_cands;
    sp_suggest_figures base;
    item *items; /* heap, best first */
    uint32_t n_items;
    sp_suggest_stats stats;
};

/* ---- values by position ---------------------------------------------------------------- */

/* The func.func op with a body numbered f, or SP_NONE. */
static uint32_t func_at(const sp_module *m, uint32_t f)
{
    const sp_block *body = &m->blocks[m->body];
    uint32_t k = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *op = &m->ops[body->ops[i]];
        if (op->kind != SP_OP_FUNC_FUNC || op->n_regions != 1 || op->regions[0].n_blocks == 0) {
            continue;
        }
        if (k++ == f) {
            return body->ops[i];
        }
    }
    return SP_NONE;
}

static const sp_block *func_block(const sp_module *m, uint32_t fn)
{
    return &m->blocks[m->ops[fn].regions[0].blocks[0]];
}

/* The value at p in m, or SP_NONE. */
static uint32_t resolve(const sp_module *m, const vpos *p)
{
    uint32_t fn = func_at(m, p->func);
    if (fn == SP_NONE) {
        return SP_NONE;
    }
    const sp_block *b = func_block(m, fn);
    if (p->op == SP_NONE) {
        return p->index < b->n_args ? b->first_arg + p->index : SP_NONE;
    }
    if (p->op >= b->n_ops) {
        return SP_NONE;
    }
    const sp_op *op = &m->ops[b->ops[p->op]];
    return p->index < op->n_results ? op->first_result + p->index : SP_NONE;
}

/* Inserts `sdy.sharding_constraint v <s>` right after v's definition (first
 * in the block for an argument); every other use of v reads the constraint.
 * s is copied into m. Errors: CM_EINVAL when s does not fit v (mesh, rank,
 * axes), CM_ENOMEM. */
static cm_status constrain(sp_module *m, uint32_t v, const sp_sharding *tmpl, cm_error *err)
{
    const sp_type *t = sp_value_type(m, v);
    if (t->kind != SP_TYPE_TENSOR) {
        return cm_error_set(err, CM_EINVAL, NULL, "only a tensor can be constrained");
    }
    sp_sharding *s = sp_sharding_clone(&m->arena, tmpl);
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
    if (s == NULL || a == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh : sp_module_mesh(m, s->mesh_name);
    if (mesh == NULL) {
        return cm_error_set(err, CM_EINVAL, NULL, "no mesh @%s in the module",
                            s->mesh_name != NULL ? s->mesh_name : "?");
    }
    cm_status st = sp_sharding_verify(s, mesh, t->rank, t->dims, err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t ty = m->values[v].type, op;
    if (sp_module_new_op(m, SP_NONE, "sdy.sharding_constraint", &v, 1, &ty, 1, &op) != CM_OK) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    a->u.sharding = s;
    if (sp_op_set_attr(m, op, "sharding", a) != CM_OK) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    uint32_t r = m->ops[op].first_result;
    for (uint32_t o = 0; o < m->n_ops; o++) {
        sp_op *x = &m->ops[o];
        for (uint32_t i = 0; o != op && i < x->n_operands; i++) {
            if (x->operands[i] == v) {
                x->operands[i] = r;
            }
        }
    }
    uint32_t def = m->values[v].def, block, index;
    if (def == SP_NONE) {
        block = m->values[v].block;
        index = 0;
    } else {
        block = m->ops[def].parent_block;
        index = sp_op_index_in_block(m, def) + 1;
    }
    if (sp_block_insert_op(m, block, index, op) != CM_OK) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    return CM_OK;
}

/* Applies the candidates edits[0..n) to m: every value is found first, as
 * each insertion moves the ops after it. */
static cm_status apply_edits(const sp_suggest *S, sp_module *m, const uint32_t *edits, uint32_t n,
                             cm_error *err)
{
    uint32_t v[MAX_EDITS];
    for (uint32_t i = 0; i < n; i++) {
        v[i] = resolve(m, &S->vals[S->cands[edits[i]].val].pos);
        if (v[i] == SP_NONE) {
            return cm_error_set(err, CM_EINTERNAL, NULL, "value %s not found again",
                                S->vals[S->cands[edits[i]].val].vref);
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        cm_status st = constrain(m, v[i], S->cands[edits[i]].s, err);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* ---- candidates --------------------------------------------------------------------------- */

static bool is_public(const sp_module *m, uint32_t fn)
{
    const sp_attr *vis = sp_op_attr(m, fn, "sym_visibility");
    return vis == NULL || vis->kind != SP_ATTR_STRING || strcmp(vis->u.str.s, "private") != 0;
}

static const char *func_name(const sp_module *m, uint32_t fn)
{
    const sp_attr *n = sp_op_attr(m, fn, "sym_name");
    return n != NULL && n->kind == SP_ATTR_STRING ? n->u.str.s : "main";
}

static double tensor_bytes(const sp_type *t)
{
    double e = (double)sp_elem_bytes(t->elem);
    for (uint32_t d = 0; d < t->rank; d++) {
        e *= t->dims[d] == SP_DIM_DYNAMIC ? 1 : (double)t->dims[d];
    }
    return e;
}

static const char *sdup(sp_suggest *S, const char *s, bool *oom)
{
    const char *r = cm_arena_strdup(&S->arena, s != NULL ? s : "");
    if (r == NULL) {
        *oom = true;
        return "";
    }
    return r;
}

__attribute__((format(printf, 3, 4))) static const char *sfmt(sp_suggest *S, bool *oom,
                                                              const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return sdup(S, buf, oom);
}

/* `{"input":N,"function":"NAME"}` with NAME escaped. */
static const char *fn_vref(sp_suggest *S, uint32_t n, const char *fname, bool *oom)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_printf(&b, "{\"input\":%u,\"function\":", n);
    sp_advise_put_jstr(&b, fname);
    cm_buf_putc(&b, '}');
    const char *r = b.oom ? NULL : cm_arena_strdup(&S->arena, b.data);
    cm_buf_fini(&b);
    *oom = *oom || r == NULL;
    return r != NULL ? r : "";
}

static int val_cmp(const void *pa, const void *pb)
{
    const cval *a = pa, *b = pb;
    if (a->local != b->local) {
        return a->local > b->local ? -1 : 1;
    }
    if (a->bytes != b->bytes) {
        return a->bytes > b->bytes ? -1 : 1;
    }
    if (a->pos.func != b->pos.func) {
        return a->pos.func < b->pos.func ? -1 : 1;
    }
    /* arguments (op SP_NONE) after ops of the same size would be odd: put them first */
    uint64_t ka = a->pos.op == SP_NONE ? 0 : (uint64_t)a->pos.op + 1;
    uint64_t kb = b->pos.op == SP_NONE ? 0 : (uint64_t)b->pos.op + 1;
    if (ka != kb) {
        return ka < kb ? -1 : 1;
    }
    return a->pos.index < b->pos.index ? -1 : a->pos.index > b->pos.index;
}

/* Lists the tensors of the public functions' top-level blocks that have no
 * user sharding: arguments without sdy.sharding, results of ops (other than
 * constants and sdy ops) without one that no sharding_constraint reads. m is
 * the input before propagation. */
static cm_status list_values(sp_suggest *S, const sp_module *m, cm_error *err)
{
    bool oom = false;
    uint8_t *constrained = cm_calloc((size_t)m->n_values + 1, 1);
    if (constrained == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind == SP_OP_SDY_SHARDING_CONSTRAINT && m->ops[i].n_operands > 0) {
            constrained[m->ops[i].operands[0]] = 1;
        }
    }
    size_t cap = 0;
    uint32_t n_funcs = 0;
    while (func_at(m, n_funcs) != SP_NONE) {
        n_funcs++;
    }
    if (S->g == NULL) {
        S->functions_form = n_funcs != 1; /* as the plan document of an MLIR input */
    }
    for (uint32_t f = 0; f < n_funcs; f++) {
        uint32_t fn = func_at(m, f);
        if (!is_public(m, fn)) {
            continue;
        }
        const sp_block *b = func_block(m, fn);
        const char *fname = func_name(m, fn);
        bool is_main = strcmp(fname, "main") == 0;
        for (uint32_t k = 0; k <= b->n_ops && !oom; k++) {
            uint32_t opid = k < b->n_ops ? b->ops[k] : SP_NONE;
            const sp_op *op = opid != SP_NONE ? &m->ops[opid] : NULL;
            uint32_t first = op != NULL ? op->first_result : b->first_arg;
            uint32_t n = op != NULL ? op->n_results : b->n_args;
            if (op != NULL && (op->kind == SP_OP_CONSTANT || strncmp(op->name, "sdy.", 4) == 0)) {
                continue;
            }
            for (uint32_t r = 0; r < n && !oom; r++) {
                uint32_t v = first + r;
                const sp_type *t = sp_value_type(m, v);
                if (t->kind != SP_TYPE_TENSOR || t->rank == 0 || constrained[v] ||
                    sp_value_sharding(m, v) != NULL) {
                    continue;
                }
                if (S->n_vals == cap) {
                    size_t nc = cap == 0 ? 64 : cap * 2;
                    cval *p = cm_realloc(S->vals, sizeof *p * nc);
                    if (p == NULL) {
                        oom = true;
                        break;
                    }
                    S->vals = p;
                    cap = nc;
                }
                cval *c = &S->vals[S->n_vals++];
                memset(c, 0, sizeof *c);
                c->pos = (vpos){f, op != NULL ? k : SP_NONE, r};
                c->bytes = tensor_bytes(t);
                c->rank = t->rank;
                sp_advise_target_of(m, S->g, v, &c->tgt); /* its strings outlive m: */
                c->tgt.name = c->tgt.name != NULL ? sdup(S, c->tgt.name, &oom) : NULL;
                c->tgt.logical = c->tgt.logical != NULL ? sdup(S, c->tgt.logical, &oom) : NULL;
                c->tgt.current = NULL; /* unannotated: replicated as the user wrote it */
                const char *gn = S->g != NULL ? sp_graph_value_name(S->g, v) : NULL;
                char path[64];
                if (op != NULL) {
                    if (S->functions_form) {
                        snprintf(path, sizeof path, "/functions/%u/ops/%u", f, k);
                    } else {
                        snprintf(path, sizeof path, "/ops/%u", k);
                    }
                    c->json = sfmt(S, &oom, "{\"op\":\"%s\",\"result\":%u}", path, r);
                    c->path = sdup(S, path, &oom);
                    c->vref = r == 0 ? sfmt(S, &oom, "%s", path) : sfmt(S, &oom, "%s#%u", path, r);
                    c->label = gn != NULL
                                   ? sfmt(S, &oom, "%%%s", gn)
                                   : sfmt(S, &oom, "result %u of %s (%s)", r, path, op->name);
                    c->token = gn != NULL ? c->label : "%v";
                    c->op_name = op->name;
                    c->line = op->line;
                    c->loc = op->loc != NULL ? sdup(S, op->loc, &oom) : "";
                } else {
                    c->func = is_main ? NULL : sdup(S, fname, &oom);
                    c->json =
                        is_main ? sfmt(S, &oom, "{\"input\":%u}", r) : fn_vref(S, r, fname, &oom);
                    c->vref =
                        is_main ? sfmt(S, &oom, "in:%u", r) : sfmt(S, &oom, "@%s:in:%u", fname, r);
                    c->token = gn != NULL ? sfmt(S, &oom, "%%%s", gn) : sfmt(S, &oom, "%%arg%u", r);
                    c->label = is_main ? c->token : sfmt(S, &oom, "%s of @%s", c->token, fname);
                    c->op_name = "func.func";
                    c->line = m->ops[fn].line;
                    c->loc = b->arg_locs != NULL && b->arg_locs[r] != NULL
                                 ? sdup(S, b->arg_locs[r], &oom)
                                 : "";
                }
            }
        }
    }
    cm_free(constrained);
    if (oom) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    S->stats.values = S->n_vals;
    return CM_OK;
}

/* The name of the first sdy.mesh with an axis of size > 1 (else the first mesh). */

/* "data,model|" style signature: the axes of each dimension (sub-axes with
 * their sizes), dimensions separated by '|'. */
static void axes_sig(const sp_sharding *s, uint32_t rank, cm_buf *b)
{
    for (uint32_t d = 0; d < rank; d++) {
        if (d > 0) {
            cm_buf_putc(b, '|');
        }
        for (uint32_t k = 0; s != NULL && d < s->rank && k < s->dims[d].n_axes; k++) {
            const sp_axis_ref *r = &s->dims[d].axes[k];
            cm_buf_printf(b, "%s%s", k > 0 ? "," : "", r->name);
            if (r->pre_size > 0) {
                cm_buf_printf(b, ":(%lld)%lld", (long long)r->pre_size, (long long)r->size);
            }
        }
    }
}

typedef struct gen {
    sp_suggest *S;
    const sp_mesh *mesh;
    uint32_t ax[SP_COST_MAX_COLL_AXES]; /* mesh axes of size > 1 */
    uint32_t n_ax;
    cm_buf sig, mine;
    size_t cap;
    bool oom;
} gen;

/* Adds candidate {d[i]: axes a[i]...} for value vi unless it is the value's
 * propagated sharding (sig); only counts it once the list is full. */
static void gen_add(gen *G, uint32_t vi, const sp_type *t, const uint32_t *dims,
                    const uint32_t *const *axes, const uint32_t *n_axes, uint32_t n_dims)
{
    sp_suggest *S = G->S;
    cm_buf_reset(&G->mine);
    for (uint32_t d = 0; d < t->rank; d++) {
        if (d > 0) {
            cm_buf_putc(&G->mine, '|');
        }
        for (uint32_t i = 0; i < n_dims; i++) {
            for (uint32_t k = 0; dims[i] == d && k < n_axes[i]; k++) {
                cm_buf_printf(&G->mine, "%s%s", k > 0 ? "," : "", G->mesh->axes[axes[i][k]].name);
            }
        }
    }
    if (G->mine.oom ||
        (G->sig.len == G->mine.len && memcmp(G->sig.data, G->mine.data, G->mine.len) == 0)) {
        G->oom = G->oom || G->mine.oom;
        return;
    }
    S->stats.candidates++;
    if (S->n_cands >= S->o.max_candidates) {
        return;
    }
    if (S->n_cands == G->cap) {
        size_t nc = G->cap == 0 ? 64 : G->cap * 2;
        cand *p = cm_realloc(S->cands, sizeof *p * nc);
        if (p == NULL) {
            G->oom = true;
            return;
        }
        S->cands = p;
        G->cap = nc;
    }
    sp_sharding *s = cm_arena_zalloc(&S->arena, sizeof *s);
    sp_dim_sharding *ds = cm_arena_zalloc(&S->arena, sizeof *ds * t->rank);
    if (s == NULL || ds == NULL) {
        G->oom = true;
        return;
    }
    s->mesh_name = S->mesh;
    s->dims = ds;
    s->rank = t->rank;
    for (uint32_t d = 0; d < t->rank; d++) {
        ds[d].is_closed = true;
        ds[d].priority = -1;
    }
    for (uint32_t i = 0; i < n_dims; i++) {
        sp_axis_ref *r = cm_arena_zalloc(&S->arena, sizeof *r * n_axes[i]);
        if (r == NULL) {
            G->oom = true;
            return;
        }
        for (uint32_t k = 0; k < n_axes[i]; k++) {
            r[k].name = G->mesh->axes[axes[i][k]].name;
            r[k].size = G->mesh->axes[axes[i][k]].size;
        }
        ds[dims[i]].axes = r;
        ds[dims[i]].n_axes = n_axes[i];
    }
    cm_buf txt;
    cm_buf_init(&txt);
    sp_sharding_print(s, &txt);
    const char *text = txt.oom ? NULL : cm_arena_strdup(&S->arena, txt.data);
    cm_buf_fini(&txt);
    if (text == NULL) {
        G->oom = true;
        return;
    }
    /* names must outlive the module the mesh came from */
    for (uint32_t i = 0; i < n_dims; i++) {
        for (uint32_t k = 0; k < n_axes[i]; k++) {
            sp_axis_ref *r = &ds[dims[i]].axes[k];
            r->name = cm_arena_strdup(&S->arena, r->name);
            G->oom = G->oom || r->name == NULL;
        }
    }
    cand *c = &S->cands[S->n_cands++];
    memset(c, 0, sizeof *c);
    c->val = vi;
    c->s = s;
    c->text = text;
}

static bool divides(int64_t dim, int64_t p)
{
    return dim != SP_DIM_DYNAMIC && dim >= p && dim % p == 0;
}

/* Every candidate of value vi (type t, propagated sharding ps): each dimension
 * on each axis, each dimension on all axes (mesh order), two dimensions on
 * two different axes. */
static void gen_value(gen *G, uint32_t vi, const sp_type *t, const sp_sharding *ps)
{
    cm_buf_reset(&G->sig);
    axes_sig(ps, t->rank, &G->sig);
    uint32_t all[SP_COST_MAX_COLL_AXES];
    int64_t prod = 1;
    for (uint32_t i = 0; i < G->n_ax; i++) {
        all[i] = G->ax[i];
        if (!cm_mul_i64(prod, G->mesh->axes[G->ax[i]].size, &prod)) {
            prod = INT64_MAX; /* divides nothing */
        }
    }
    for (uint32_t d = 0; d < t->rank && !G->oom; d++) {
        for (uint32_t i = 0; i < G->n_ax; i++) {
            if (divides(t->dims[d], G->mesh->axes[G->ax[i]].size)) {
                const uint32_t *a[1] = {&G->ax[i]};
                uint32_t na[1] = {1};
                gen_add(G, vi, t, &d, a, na, 1);
            }
        }
    }
    for (uint32_t d = 0; G->n_ax > 1 && d < t->rank && !G->oom; d++) {
        if (divides(t->dims[d], prod)) {
            const uint32_t *a[1] = {all};
            uint32_t na[1] = {G->n_ax};
            gen_add(G, vi, t, &d, a, na, 1);
        }
    }
    for (uint32_t d1 = 0; G->n_ax > 1 && d1 < t->rank && !G->oom; d1++) {
        for (uint32_t d2 = d1 + 1; d2 < t->rank; d2++) {
            for (uint32_t i = 0; i < G->n_ax; i++) {
                for (uint32_t j = 0; j < G->n_ax; j++) {
                    if (i == j || !divides(t->dims[d1], G->mesh->axes[G->ax[i]].size) ||
                        !divides(t->dims[d2], G->mesh->axes[G->ax[j]].size)) {
                        continue;
                    }
                    uint32_t dd[2] = {d1, d2}, na[2] = {1, 1};
                    const uint32_t *a[2] = {&G->ax[i], &G->ax[j]};
                    gen_add(G, vi, t, dd, a, na, 2);
                }
            }
        }
    }
}

/* After the baseline's propagation: the candidates of every value, values
 * with the largest per-device shard first (then the largest tensors),
 * skipping the sharding a value already gets. */
static cm_status gen_candidates(sp_suggest *S, const sp_module *m, cm_error *err)
{
    gen G;
    memset(&G, 0, sizeof G);
    G.S = S;
    G.mesh = S->mesh != NULL ? sp_module_mesh(m, S->mesh) : NULL;
    for (uint32_t i = 0; G.mesh != NULL && i < G.mesh->n_axes && G.n_ax < SP_COST_MAX_COLL_AXES;
         i++) {
        if (G.mesh->axes[i].size > 1) {
            G.ax[G.n_ax++] = i;
        }
    }
    /* largest per-device shard first: what a constraint can still divide */
    for (uint32_t i = 0; i < S->n_vals; i++) {
        uint32_t v = S->vals[i].vid;
        S->vals[i].local = v != SP_NONE ? sp_cost_value_bytes(m, v) : 0;
    }
    if (S->n_vals > 1) {
        qsort(S->vals, S->n_vals, sizeof *S->vals, val_cmp);
    }
    cm_buf_init(&G.sig);
    cm_buf_init(&G.mine);
    for (uint32_t i = 0; G.n_ax > 0 && i < S->n_vals && !G.oom; i++) {
        uint32_t v = S->vals[i].vid;
        if (v == SP_NONE) {
            continue;
        }
        const sp_sharding *ps = sp_value_sharding(m, v);
        if (ps != NULL && ps->mesh_name != NULL && strcmp(ps->mesh_name, S->mesh) != 0) {
            ps = NULL; /* on another mesh: every candidate differs */
        }
        gen_value(&G, i, sp_value_type(m, v), ps);
    }
    bool oom = G.oom || G.sig.oom;
    cm_buf_fini(&G.sig);
    cm_buf_fini(&G.mine);
    return oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest") : CM_OK;
}

/* ---- runs --------------------------------------------------------------------------------- */

/* Propagates (the input's pass and rules), partitions and costs m into *f
 * (the candidates are generated after propagation for the baseline run). */
static cm_status run_module(sp_suggest *S, sp_module *m, bool baseline, sp_suggest_figures *f,
                            cm_error *err)
{
    for (uint32_t i = 0; baseline && i < S->n_vals; i++) {
        S->vals[i].vid = resolve(m, &S->vals[i].pos);
    }
    /* the input's pass and rules, as its plan propagates (planner/doc/sp_input.h) */
    sp_diags d;
    sp_diags_init(&d);
    cm_status st = sp_input_propagate(m, S->in_opts.pass, S->custom, false, &S->cancel, &d, err);
    sp_diags_fini(&d);
    if (st == CM_OK && baseline) {
        st = gen_candidates(S, m, err);
    }
    sp_cost *c = NULL;
    if (st == CM_OK) {
        st = sp_advise_partition_cost(m, false, &S->profile, -1, S->custom, NULL, &c, err);
    }
    if (st == CM_OK) {
        const sp_cost_summary *s = sp_cost_get_summary(c);
        f->step_s = s->step_s;
        f->peak_bytes = s->peak_bytes;
        f->comm_bytes = s->comm_bytes;
    }
    sp_cost_destroy(c);
    return st;
}

typedef struct pool {
    sp_suggest *S;
    job *jobs;
    uint32_t n;
    atomic_uint next;
    atomic_bool stopped; /* the caller's cancel hook said stop */
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        unsigned j = atomic_fetch_add(&p->next, 1u);
        if (j >= p->n) {
            return NULL;
        }
        const sp_suggest_opts *o = &p->S->o;
        if (atomic_load(&p->stopped) || (o->cancel != NULL && o->cancel(o->cancel_ctx))) {
            atomic_store(&p->stopped, true);
            return NULL;
        }
        job *jb = &p->jobs[j];
        cm_error err;
        cm_error_clear(&err);
        sp_input in;
        cm_status st = sp_input_read(p->S->text, p->S->text_len, &p->S->run_opts, &in, &err);
        if (st == CM_OK) {
            st = apply_edits(p->S, in.m, jb->edits, jb->n, &err);
        }
        if (st == CM_OK) {
            st = run_module(p->S, in.m, false, &jb->f, &err);
        }
        jb->ok = st == CM_OK;
        jb->oom = st == CM_ENOMEM;
        sp_input_fini(&in); /* zeroed by a failed read */
    }
}

static cm_status run_jobs(sp_suggest *S, job *jobs, uint32_t n, cm_error *err)
{
    pool p;
    p.S = S;
    p.jobs = jobs;
    p.n = n;
    atomic_init(&p.next, 0u);
    atomic_init(&p.stopped, false);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t nt = S->o.threads > 0 ? S->o.threads : cores > 0 ? (uint32_t)cores : 1;
    nt = nt > 64 ? 64 : nt;
    sp_advise_threads_run(worker, &p, nt < n ? nt : n);
    if (atomic_load(&p.stopped)) {
        return cm_error_set(err, CM_EIO, NULL, "suggest stopped before its end (cancelled)");
    }
    bool oom = false;
    for (uint32_t i = 0; i < n; i++) {
        S->stats.evaluated++;
        S->stats.failed += !jobs[i].ok;
        oom = oom || jobs[i].oom;
    }
    return oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest") : CM_OK;
}

/* ---- the search ------------------------------------------------------------------------------ */

static double gain_of(const sp_suggest *S, const sp_suggest_figures *f, bool other)
{
    bool mem = (S->o.objective == SP_SUGGEST_MEMORY) != other;
    return mem ? S->base.peak_bytes - f->peak_bytes : S->base.step_s - f->step_s;
}

/* Does a beat b in the objective (then the other figure)? */
static bool better(const sp_suggest *S, const sp_suggest_figures *a, const sp_suggest_figures *b)
{
    double ga = gain_of(S, a, false), gb = gain_of(S, b, false);
    if (ga != gb) {
        return ga > gb;
    }
    return gain_of(S, a, true) > gain_of(S, b, true);
}

/* A real gain: above rounding of the baseline's figure. */
static bool gains(const sp_suggest *S, const sp_suggest_figures *f, const sp_suggest_figures *than)
{
    double b = S->o.objective == SP_SUGGEST_MEMORY ? S->base.peak_bytes : S->base.step_s;
    return gain_of(S, f, false) - (than != NULL ? gain_of(S, than, false) : 0) > 1e-9 * b;
}

static cm_status add_item(sp_suggest *S, const uint32_t *edits, uint32_t n,
                          const sp_suggest_figures *f, cm_error *err)
{
    item *it = &S->items[S->n_items++];
    memset(it, 0, sizeof *it);
    memcpy(it->edits, edits, sizeof *edits * n);
    bool oom = false;
    cm_buf lab, sh, jx;
    cm_buf_init(&lab);
    cm_buf_init(&sh);
    cm_buf_init(&jx);
    for (uint32_t i = 0; i < n; i++) {
        const cand *c = &S->cands[edits[i]];
        const cval *v = &S->vals[c->val];
        it->e[i] = (sp_suggest_edit){v->json, v->vref, c->text, v->label};
        if (i > 0) {
            cm_buf_puts(&lab, " + ");
            cm_buf_putc(&sh, '\n');
            cm_buf_putc(&jx, '\n');
        }
        cm_buf_puts(&lab, v->label);
        sp_advise_fix_write(c->s, S->mesh, v->rank, SP_NONE, NULL, 0, v->token, &v->tgt, &sh, &jx);
    }
    const cval *v0 = &S->vals[S->cands[edits[0]].val];
    sp_suggestion *p = &it->pub;
    p->edits = it->e;
    p->n_edits = n;
    p->op = v0->op_name;
    p->line = v0->line;
    p->loc = v0->loc;
    p->predicted = *f;
    p->gain_step_s = S->base.step_s - f->step_s;
    p->gain_peak_bytes = S->base.peak_bytes - f->peak_bytes;
    oom = lab.oom || sh.oom || jx.oom;
    p->label = oom ? "" : sdup(S, lab.data, &oom);
    p->fix_shardy = oom ? "" : sdup(S, sh.data, &oom);
    p->fix_jax = oom ? "" : sdup(S, jx.data, &oom);
    cm_buf_fini(&lab);
    cm_buf_fini(&sh);
    cm_buf_fini(&jx);
    return oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest") : CM_OK;
}

/* Round 1 scores every candidate; the greedy search grows the best one. */
static cm_status search(sp_suggest *S, cm_error *err)
{
    uint32_t n = S->n_cands;
    job *jobs = cm_calloc((size_t)n + NEXT_POOL, sizeof *jobs);
    uint32_t *order = cm_calloc((size_t)n + 1, sizeof *order);
    if (jobs == NULL || order == NULL) {
        cm_free(jobs);
        cm_free(order);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    for (uint32_t i = 0; i < n; i++) {
        jobs[i].edits[0] = i;
        jobs[i].n = 1;
    }
    cm_status rs = run_jobs(S, jobs, n, err);
    if (rs != CM_OK) {
        cm_free(jobs);
        cm_free(order);
        return rs;
    }
    /* the gaining candidates, best first, one per value */
    uint32_t n_ord = 0;
    for (uint32_t i = 0; i < n; i++) {
        S->cands[i].ok = jobs[i].ok;
        S->cands[i].f = jobs[i].f;
        if (!jobs[i].ok || !gains(S, &jobs[i].f, NULL)) {
            continue;
        }
        uint32_t at = n_ord;
        while (at > 0 && better(S, &jobs[i].f, &S->cands[order[at - 1]].f)) {
            at--;
        }
        memmove(&order[at + 1], &order[at], sizeof *order * (n_ord - at));
        order[at] = i;
        n_ord++;
    }
    uint32_t n_single = 0;
    for (uint32_t i = 0; i < n_ord; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < n_single && !seen; j++) {
            seen = S->cands[order[j]].val == S->cands[order[i]].val;
        }
        if (!seen) {
            order[n_single++] = order[i];
        }
    }
    /* greedy: the best single constraint, then the best further one on another value */
    uint32_t combo[MAX_EDITS], n_combo = 0;
    sp_suggest_figures cf;
    memset(&cf, 0, sizeof cf);
    if (n_single > 0) {
        combo[n_combo++] = order[0];
        cf = S->cands[order[0]].f;
    }
    while (n_combo > 0 && n_combo < S->o.max_edits) {
        uint32_t nj = 0;
        for (uint32_t i = 0; i < n_single && nj < NEXT_POOL; i++) {
            bool used = false;
            for (uint32_t k = 0; k < n_combo && !used; k++) {
                used = S->cands[combo[k]].val == S->cands[order[i]].val;
            }
            if (used) {
                continue;
            }
            memcpy(jobs[nj].edits, combo, sizeof *combo * n_combo);
            jobs[nj].edits[n_combo] = order[i];
            jobs[nj].n = n_combo + 1;
            jobs[nj].ok = jobs[nj].oom = false;
            nj++;
        }
        if (nj == 0) {
            break;
        }
        rs = run_jobs(S, jobs, nj, err);
        if (rs != CM_OK) {
            cm_free(jobs);
            cm_free(order);
            return rs;
        }
        int32_t best = -1;
        for (uint32_t j = 0; j < nj; j++) {
            if (jobs[j].ok && gains(S, &jobs[j].f, &cf) &&
                (best < 0 || better(S, &jobs[j].f, &jobs[best].f))) {
                best = (int32_t)j;
            }
        }
        if (best < 0) {
            break;
        }
        combo[n_combo] = jobs[best].edits[n_combo];
        n_combo++;
        cf = jobs[best].f;
    }
    cm_free(jobs);
    uint32_t cap = n_single + 1;
    S->items = cm_calloc(cap, sizeof *S->items);
    cm_status st =
        S->items != NULL ? CM_OK : cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    if (st == CM_OK && n_combo > 1) {
        st = add_item(S, combo, n_combo, &cf, err);
    }
    for (uint32_t i = 0; st == CM_OK && i < n_single; i++) {
        st = add_item(S, &order[i], 1, &S->cands[order[i]].f, err);
    }
    cm_free(order);
    if (st != CM_OK) {
        return st;
    }
    /* best first (insertion sort: few items), then at most k */
    for (uint32_t i = 1; i < S->n_items; i++) {
        item t = S->items[i];
        uint32_t j = i;
        while (j > 0 && better(S, &t.pub.predicted, &S->items[j - 1].pub.predicted)) {
            S->items[j] = S->items[j - 1];
            j--;
        }
        S->items[j] = t;
    }
    S->n_items = S->n_items < S->o.k ? S->n_items : S->o.k;
    for (uint32_t i = 0; i < S->n_items; i++) {
        S->items[i].pub.rank = i + 1;
        S->items[i].pub.edits = S->items[i].e; /* moved by the sort */
    }
    return CM_OK;
}

/* ---- the run ------------------------------------------------------------------------------- */

static cm_status check_opts(const sp_suggest_opts *o, cm_error *err)
{
    if (o->objective != SP_SUGGEST_TIME && o->objective != SP_SUGGEST_MEMORY) {
        return cm_error_set(err, CM_EINVAL, "/objective", "give time or memory");
    }
    if (o->k < 1 || o->k > MAX_K) {
        return cm_error_set(err, CM_EINVAL, "/k", "must be in [1, %d]", MAX_K);
    }
    if (o->max_candidates < 1 || o->max_candidates > 4096) {
        return cm_error_set(err, CM_EINVAL, "/max_candidates", "must be in [1, 4096]");
    }
    if (o->max_edits < 1 || o->max_edits > MAX_EDITS) {
        return cm_error_set(err, CM_EINVAL, "/max_edits", "must be in [1, %d]", MAX_EDITS);
    }
    if (o->threads > 64) {
        return cm_error_set(err, CM_EINVAL, "/threads", "must be in [0, 64]");
    }
    return CM_OK;
}

/* Keeps the caller's input options in S: the pass for every run, the
 * rules document and limits (copied) for sp_suggest_apply's edit texts. */
static cm_status keep_in_opts(sp_suggest *S, const sp_input_opts *in_opts, cm_error *err)
{
    if (in_opts != NULL) {
        S->in_opts = *in_opts;
    } else {
        sp_input_opts_init(&S->in_opts);
    }
    S->in_opts.propagate = false; /* the runs propagate themselves */
    S->in_opts.record_edges = false;
    if (S->in_opts.rules != NULL && S->in_opts.rules_len > 0) {
        S->rules = cm_alloc(S->in_opts.rules_len);
        if (S->rules == NULL) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
        }
        memcpy(S->rules, S->in_opts.rules, S->in_opts.rules_len);
        S->in_opts.rules = S->rules;
    }
    if (S->in_opts.limits != NULL) {
        S->limits = *S->in_opts.limits;
        S->in_opts.limits = &S->limits;
    }
    /* every run reads MLIR text (no limits) under the same pass; the rules
       are the input's, decoded once (S->custom) */
    S->run_opts = S->in_opts;
    S->run_opts.rules = NULL;
    S->run_opts.rules_len = 0;
    S->run_opts.limits = NULL;
    return CM_OK;
}

cm_status sp_suggest_run(const char *text, size_t len, const sp_input_opts *in_opts,
                         const sp_suggest_opts *o, sp_suggest **out, cm_error *err)
{
    *out = NULL;
    sp_suggest_opts defo;
    if (o == NULL) {
        sp_suggest_opts_init(&defo);
        o = &defo;
    }
    cm_status st = check_opts(o, err);
    if (st != CM_OK) {
        return st;
    }
    double t0 = cm_now();
    sp_suggest *S = cm_calloc(1, sizeof *S);
    if (S == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    cm_arena_init(&S->arena, 16384);
    S->o = *o;
    S->cancel = (cm_cancel){o->cancel, o->cancel_ctx};
    if (o->profile != NULL) {
        S->profile = *o->profile;
    } else {
        sp_profile_default(&S->profile);
    }
    S->input = cm_alloc(len + 1);
    if (S->input == NULL) {
        sp_suggest_destroy(S);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
    }
    memcpy(S->input, text, len);
    S->input[len] = '\0';
    S->input_len = len;
    st = keep_in_opts(S, in_opts, err);
    /* the input as read, before propagation: the unannotated values */
    if (st == CM_OK) {
        st = sp_input_read(text, len, &S->in_opts, &S->in, err);
    }
    sp_module *m = S->in.m; /* the input as read (MLIR), or the graph's module */
    if (st == CM_OK) {
        S->g = S->in.g;
        S->custom = S->in.custom;
    }
    if (st == CM_OK && S->g != NULL) {
        S->functions_form = S->in.functions_form;
        cm_buf b;
        cm_buf_init(&b);
        sp_print_opts po = {false, false};
        sp_mlir_print(m, &po, &b);
        S->text_len = b.len;
        S->text = b.oom ? NULL : cm_buf_take(&b);
        cm_buf_fini(&b);
        if (S->text == NULL) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
        }
    } else if (st == CM_OK) {
        S->text = cm_alloc(len + 1);
        if (S->text == NULL) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest");
        } else {
            memcpy(S->text, text, len);
            S->text[len] = '\0';
            S->text_len = len;
        }
    }
    if (st == CM_OK) {
        S->stats.n_ops = m->n_ops;
        const char *mesh = sp_advise_main_mesh(m);
        bool oom = false;
        S->mesh = mesh != NULL ? sdup(S, mesh, &oom) : NULL;
        st = oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory in suggest")
                 : list_values(S, m, err);
    }
    /* the baseline: the graph's module is printed and read again, as every
     * candidate is; an MLIR input's own read is that read */
    sp_input own;
    memset(&own, 0, sizeof own);
    if (st == CM_OK && S->g != NULL) {
        st = sp_input_read(S->text, S->text_len, &S->run_opts, &own, err);
        m = own.m;
    }
    if (st == CM_OK) {
        st = run_module(S, m, true, &S->base, err);
    }
    sp_input_fini(&own);
    if (S->g == NULL) {
        /* an MLIR input's module is spent; its rules document stays */
        sp_module_destroy(S->in.m);
        S->in.m = NULL;
    }
    if (st == CM_OK) {
        st = search(S, err);
    }
    if (st != CM_OK) {
        sp_suggest_destroy(S);
        return st;
    }
    S->stats.seconds = cm_now() - t0;
    *out = S;
    return CM_OK;
}

void sp_suggest_destroy(sp_suggest *S)
{
    if (S == NULL) {
        return;
    }
    sp_input_fini(&S->in);
    cm_free(S->rules);
    cm_free(S->text);
    cm_free(S->input);
    cm_free(S->vals);
    cm_free(S->cands);
    cm_free(S->items);
    cm_arena_fini(&S->arena);
    cm_free(S);
}

uint32_t sp_suggest_n(const sp_suggest *S)
{
    return S->n_items;
}

const sp_suggestion *sp_suggest_at(const sp_suggest *S, uint32_t i)
{
    return i < S->n_items ? &S->items[i].pub : NULL;
}

const sp_suggest_figures *sp_suggest_baseline(const sp_suggest *S)
{
    return &S->base;
}

const sp_suggest_stats *sp_suggest_get_stats(const sp_suggest *S)
{
    return &S->stats;
}

cm_status sp_suggest_apply(const sp_suggest *S, uint32_t i, cm_buf *mlir, cm_error *err)
{
    if (i != UINT32_MAX && i >= S->n_items) {
        return cm_error_set(err, CM_EINVAL, "/suggestion", "no suggestion %u", i);
    }
    /* what-if's edit application on the input as given, with the contract's
     * edits: the module a client gets by sending the suggestion to what-if */
    sp_edit_list l;
    sp_edit_list_init(&l);
    cm_status st = CM_OK;
    for (uint32_t k = 0; i != UINT32_MAX && k < S->items[i].pub.n_edits && st == CM_OK; k++) {
        const cand *c = &S->cands[S->items[i].edits[k]];
        const cval *v = &S->vals[c->val];
        sp_edit e;
        memset(&e, 0, sizeof e);
        e.kind = SP_EDIT_CONSTRAIN;
        e.value.kind = v->path != NULL ? SP_VREF_OP : SP_VREF_INPUT;
        e.value.function = v->func;
        e.value.index = v->pos.index;
        e.value.op = v->path;
        e.value.result = v->pos.index;
        e.sharding = c->text;
        st = sp_edit_list_add(&l, &e, err);
    }
    if (st == CM_OK) {
        st = sp_whatif_edit_text(S->input, S->input_len, &S->in_opts, &l, mlir, err);
    }
    sp_edit_list_fini(&l);
    return st;
}

/* ---- writers ----------------------------------------------------------------------------------
 */

static void put_figures(cm_buf *b, const sp_suggest_figures *f)
{
    cm_buf_printf(b, "{\"step_s\":%.12g,\"peak_bytes\":%.17g,\"comm_bytes\":%.17g}", f->step_s,
                  f->peak_bytes, f->comm_bytes);
}

static void put_check(cm_buf *b, const char *key, const sp_suggest_check *c, uint32_t i,
                      double pred)
{
    cm_buf_printf(b, "\"%s\":{\"predicted_s\":%.12g", key, pred);
    if (c->done[i]) {
        cm_buf_printf(b, ",\"measured_s\":%.12g,\"devices\":%u,\"numerics\":", c->ms[i].step_s,
                      c->ms[i].devices);
        sp_advise_put_jstr(b, c->ms[i].note);
    } else {
        cm_buf_puts(b, ",\"error\":");
        sp_advise_put_jstr(b, c->error[i]);
    }
    cm_buf_putc(b, '}');
}

static void write_json(const sp_suggest *S, const sp_suggest_check *chk, cm_buf *b)
{
    cm_buf_puts(b, "{\"objective\":");
    sp_advise_put_jstr(b, sp_suggest_objective_name(S->o.objective));
    cm_buf_puts(b, ",\"profile\":");
    sp_advise_put_jstr(b, S->profile.name);
    cm_buf_puts(b, ",\n\"baseline\":");
    put_figures(b, &S->base);
    cm_buf_puts(b, ",\n\"suggestions\":[");
    for (uint32_t i = 0; i < S->n_items; i++) {
        const sp_suggestion *s = &S->items[i].pub;
        cm_buf_printf(b, "%s\n{\"rank\":%u,\"edits\":[", i > 0 ? "," : "", s->rank);
        for (uint32_t k = 0; k < s->n_edits; k++) {
            cm_buf_printf(b,
                          "%s{\"kind\":\"constrain\",\"value\":%s,\"sharding\":", k > 0 ? "," : "",
                          s->edits[k].value);
            sp_advise_put_jstr(b, s->edits[k].sharding);
            cm_buf_putc(b, '}');
        }
        cm_buf_puts(b, "],\"label\":");
        sp_advise_put_jstr(b, s->label);
        cm_buf_puts(b, ",\"op\":");
        sp_advise_put_jstr(b, s->op);
        cm_buf_printf(b, ",\"line\":%u,\"loc\":", s->line);
        sp_advise_put_jstr(b, s->loc);
        cm_buf_puts(b, ",\"fix\":{\"shardy\":");
        sp_advise_put_jstr(b, s->fix_shardy);
        cm_buf_puts(b, ",\"jax\":");
        sp_advise_put_jstr(b, s->fix_jax);
        cm_buf_puts(b, "},\"predicted\":");
        put_figures(b, &s->predicted);
        cm_buf_printf(b, ",\"gain\":{\"step_s\":%.12g,\"peak_bytes\":%.17g}}", s->gain_step_s,
                      s->gain_peak_bytes);
    }
    cm_buf_printf(b, "],\n\"candidates\":%u,\"evaluated\":%u,\"seconds\":%.6g", S->stats.candidates,
                  S->stats.evaluated, S->stats.seconds);
    if (chk != NULL) {
        cm_buf_printf(b, ",\n\"check\":{\"iters\":%u,", chk->iters);
        put_check(b, "baseline", chk, 0, S->base.step_s);
        if (S->n_items > 0) {
            cm_buf_putc(b, ',');
            put_check(b, "top", chk, 1, S->items[0].pub.predicted.step_s);
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "}");
}

void sp_suggest_write_json(const sp_suggest *S, cm_buf *b)
{
    write_json(S, NULL, b);
}

void sp_suggest_check_write_json(const sp_suggest *S, const sp_suggest_check *c, cm_buf *b)
{
    write_json(S, c, b);
}

static void put_mib(cm_buf *b, double bytes)
{
    cm_buf_printf(b, "%.4g MiB", bytes / 1048576.0);
}

static void put_delta(cm_buf *b, double gain, double base, bool bytes)
{
    /* a gain is a reduction: print the change, negative when better */
    double pct = base != 0 ? -100.0 * gain / base : 0;
    if (bytes) {
        cm_buf_printf(b, "%+.4g MiB, %+.1f%%", -gain / 1048576.0, pct);
    } else {
        cm_buf_printf(b, "%+.4g ms, %+.1f%%", -gain * 1e3, pct);
    }
}

void sp_suggest_write_text(const sp_suggest *S, cm_buf *b)
{
    cm_buf_printf(b, "baseline: step %.4g ms, peak ", S->base.step_s * 1e3);
    put_mib(b, S->base.peak_bytes);
    cm_buf_puts(b, ", comm ");
    put_mib(b, S->base.comm_bytes);
    cm_buf_printf(b, " per device (profile %s, objective %s)\n", S->profile.name,
                  sp_suggest_objective_name(S->o.objective));
    for (uint32_t i = 0; i < S->n_items; i++) {
        const sp_suggestion *s = &S->items[i].pub;
        for (uint32_t k = 0; k < s->n_edits; k++) {
            if (k == 0) {
                cm_buf_printf(b, "%u. ", s->rank);
            } else {
                cm_buf_puts(b, "   + ");
            }
            cm_buf_printf(b, "constrain %s [%s] to %s", s->edits[k].label, s->edits[k].vref,
                          s->edits[k].sharding);
            if (k == 0 && s->line > 0) {
                cm_buf_printf(b, " (%s, line %u)", s->op, s->line);
            }
            cm_buf_putc(b, '\n');
        }
        cm_buf_printf(b, "   predicted: step %.4g ms (", s->predicted.step_s * 1e3);
        put_delta(b, s->gain_step_s, S->base.step_s, false);
        cm_buf_puts(b, "), peak ");
        put_mib(b, s->predicted.peak_bytes);
        cm_buf_puts(b, " (");
        put_delta(b, s->gain_peak_bytes, S->base.peak_bytes, true);
        cm_buf_puts(b, "), comm ");
        put_mib(b, s->predicted.comm_bytes);
        cm_buf_puts(b, "\n   fix: ");
        for (const char *p = s->fix_shardy; *p != '\0'; p++) {
            cm_buf_puts(b, *p == '\n' ? "\n        " : "");
            if (*p != '\n') {
                cm_buf_putc(b, *p);
            }
        }
        cm_buf_puts(b, "\n        ");
        for (const char *p = s->fix_jax; *p != '\0'; p++) {
            cm_buf_puts(b, *p == '\n' ? "\n        " : "");
            if (*p != '\n') {
                cm_buf_putc(b, *p);
            }
        }
        cm_buf_putc(b, '\n');
    }
    if (S->n_items == 0) {
        cm_buf_printf(b, "no constraint reduces the predicted %s\n",
                      S->o.objective == SP_SUGGEST_MEMORY ? "peak memory" : "step time");
    }
    cm_buf_printf(b,
                  "%u suggestion%s; %u candidate constraints on %u unannotated values, %u "
                  "evaluated (%u failed) in %.3f s, %u ops\n",
                  S->n_items, S->n_items == 1 ? "" : "s", S->stats.candidates, S->stats.values,
                  S->stats.evaluated, S->stats.failed, S->stats.seconds, S->stats.n_ops);
}

/* ---- the check of `suggest --check` ------------------------------------------------------ */

/* Measures the input (i = 0) or the top suggestion (i = 1) into c. */
static void check_one(const sp_suggest *S, sp_suggest_bench_fn bench, sp_suggest_check *c,
                      uint32_t i)
{
    cm_error err;
    cm_error_clear(&err);
    cm_buf b;
    cm_buf_init(&b);
    cm_status st = sp_suggest_apply(S, i == 0 ? UINT32_MAX : 0, &b, &err);
    if (st == CM_OK) {
        st = bench(b.data, b.len, c->iters, &c->ms[i], &err);
    }
    c->done[i] = st == CM_OK;
    if (st != CM_OK) {
        snprintf(c->error[i], sizeof c->error[i], "%s%s%s", err.path, err.path[0] ? ": " : "",
                 err.msg);
    }
    cm_buf_fini(&b);
}

void sp_suggest_check_write_text(const sp_suggest *S, const sp_suggest_check *c, cm_buf *b)
{
    cm_buf_printf(b, "check: %u runs of each module on this machine\n", c->iters);
    for (uint32_t i = 0; i < 2 && (i == 0 || S->n_items > 0); i++) {
        double pred = i == 0 ? S->base.step_s : S->items[0].pub.predicted.step_s;
        cm_buf_printf(b, "  %-9s predicted %.4g ms, ",
                      i == 0 ? "baseline:" : "rank 1:", pred * 1e3);
        if (c->done[i]) {
            cm_buf_printf(b, "measured %.4g ms on %u devices (numerics: %s)\n",
                          c->ms[i].step_s * 1e3, c->ms[i].devices, c->ms[i].note);
        } else {
            cm_buf_printf(b, "not measured: %s\n", c->error[i]);
        }
    }
    if (S->n_items == 0) {
        cm_buf_puts(b, "  no suggestion to measure\n");
    } else if (c->done[0] && c->done[1] && c->ms[0].step_s > 0) {
        cm_buf_printf(b, "  measured change %+.1f%%, predicted %+.1f%%\n",
                      100.0 * (c->ms[1].step_s - c->ms[0].step_s) / c->ms[0].step_s,
                      S->base.step_s > 0 ? -100.0 * S->items[0].pub.gain_step_s / S->base.step_s
                                         : 0.0);
    }
}

void sp_suggest_check_run(const sp_suggest *S, sp_suggest_bench_fn bench, uint32_t iters,
                          sp_suggest_check *c)
{
    memset(c, 0, sizeof *c);
    c->iters = iters;
    check_one(S, bench, c, 0);
    if (S->n_items > 0) {
        check_one(S, bench, c, 1);
    }
}
