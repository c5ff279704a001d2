/* SPDX-License-Identifier: Apache-2.0
 * planner: the per-device cost model (see sp_cost.h, docs/cost-model.md).
 * One walk over each root function in program order: every op adds its FLOPs,
 * memory traffic and communication (times the calls of its function), and a
 * liveness sweep over the function's top-level ops gives the peak of live
 * activation bytes. Nothing is kept per op, so a million-op module costs in
 * one pass with a few arrays indexed by value id. */
#include "sp_cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cm_json.h"
#include "sp_attrs.h"
#include "sp_ops.h"
#include "sp_profile_json.h"
#include "sp_diag.h"

/* ---- profiles ---------------------------------------------------------------------- */

void sp_profile_default(sp_profile *p)
{
    /* Keep in step with profiles/cpu-local.json (a unit test compares them). */
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cpu-local");
    snprintf(p->source, sizeof p->source,
             "measured on this machine, shared/MACHINE-NOTES.md (AMD EPYC Zen 3, 2 cores, "
             "OpenBLAS 0.3.21, one thread per device worker); not yet calibrated by the executor");
    p->peak_flops[SP_COST_F64] = 38e9;
    p->peak_flops[SP_COST_F32] = 80e9;
    p->peak_flops[SP_COST_INT32] = 20e9;
    p->mem_bytes = 24.0 * 1024 * 1024 * 1024;
    p->mem_shared = true;
    p->mem_bandwidth = 8.8e9;
    p->link.bandwidth = 6.0e9;
    p->link.latency = 75e-6;
    p->overlap = 0.0;
}

double sp_profile_peak(const sp_profile *p, sp_cost_dtype d, bool is_matmul)
{
    if (d == SP_COST_F32 && is_matmul && p->peak_flops[SP_COST_TF32] > 0) {
        return p->peak_flops[SP_COST_TF32];
    }
    if (p->peak_flops[d] > 0) {
        return p->peak_flops[d];
    }
    if (p->peak_flops[SP_COST_F32] > 0) {
        return p->peak_flops[SP_COST_F32];
    }
    double best = 0;
    for (int i = 0; i < SP_COST_N_DTYPES; i++) {
        best = p->peak_flops[i] > best ? p->peak_flops[i] : best;
    }
    return best;
}

double sp_profile_dot_rate(const sp_profile *p, sp_cost_dtype d, double m, double k, double n)
{
    double peak = sp_profile_peak(p, d, true);
    if (p->n_gemm == 0 || !(m > 0 && k > 0 && n > 0)) {
        return peak;
    }
    double size = cbrt(m * k * n), r = p->gemm[p->n_gemm - 1].flops;
    if (size <= p->gemm[0].n) {
        r = p->gemm[0].flops;
    } else {
        for (uint32_t i = 1; i < p->n_gemm; i++) {
            const sp_profile_gemm *a = &p->gemm[i - 1], *b = &p->gemm[i];
            if (size <= b->n) {
                double t = log(size / a->n) / log(b->n / a->n);
                r = a->flops + t * (b->flops - a->flops);
                break;
            }
        }
    }
    /* the curve is f32's; other dtypes keep its shape under their own peak */
    double f32 = sp_profile_peak(p, SP_COST_F32, true);
    return f32 > 0 && peak > 0 ? peak * r / f32 : r;
}

const sp_profile_link *sp_profile_link_of(const sp_profile *p, const char *axis)
{
    for (uint32_t i = 0; axis != NULL && i < p->n_links; i++) {
        if (strcmp(p->links[i].axis, axis) == 0) {
            return &p->links[i];
        }
    }
    return &p->link;
}

static const char *const coll_names[SP_COLL_N_KINDS] = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute", "all_slice"};

const char *sp_coll_kind_name(sp_coll_kind k)
{
    return (unsigned)k < SP_COLL_N_KINDS ? coll_names[k] : "?";
}

void sp_cost_opts_init(sp_cost_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode = SP_COST_AUTO;
    o->overlap = -1;
}

/* ---- state --------------------------------------------------------------------------- */

struct sp_cost {
    sp_cost_summary s;
    sp_cost_op *ops; /* by op id, with opts.per_op; else NULL */
    uint32_t n_ops;
    sp_cost_coll *colls;
    uint32_t n_colls, cap_colls;
    sp_cost_axis *axes;
    uint32_t n_axes, cap_axes;
    sp_cost_mem_point *mem; /* with opts.timeline */
    uint32_t n_mem, cap_mem;
    sp_cost_buffer bufs[SP_COST_MAX_PEAK_BUFFERS]; /* largest first */
    uint32_t n_bufs;
    double best_peak;       /* the largest root-block peak seen so far */
    const char *const *value_names; /* opts.value_names (the caller's, for the writers) */
    uint32_t n_value_names;
};

#define MAX_FACTORS   64
#define MAX_DIM_AXES  8
#define MAX_CALL_DEPTH 64
/* Op instances a cost walk visits at most, calls expanded (every call site
 * walks its callee again), beyond twice the module's ops: a 5 KB module of
 * 24 functions each calling the next twice expanded to 2^24 instances and
 * 3 s of one plan worker (2^40 would have been days), while real programs
 * expand to about their op count. */
#define MAX_OP_INSTANCES (2u * 1024 * 1024)

typedef struct cctx {
    sp_module *m;
    const sp_cost_opts *o;
    const sp_profile *p;
    sp_cost *c;
    bool implied;
    cm_status st;
    cm_error *err;
    const char *mesh_name; /* one-entry cache of sp_module_mesh */
    const sp_mesh *mesh;
    const sp_sharding **shard; /* value id -> sharding, UNSET until looked up (may be NULL) */
    double *elems;         /* value id -> local element count, < 0 until computed */
    uint32_t *last_use;    /* value id -> top-level index of its last use, SP_NONE */
    uint8_t *weight;       /* value id -> feeds a dot/convolution weight operand */
    uint32_t *alias;       /* value id -> the value whose buffer it shares */
    uint32_t *pos;         /* value id -> index of its op in its block (0 for arguments) */
    uint8_t *owned;        /* value id -> holds a buffer of its own in its block's walk */
    uint8_t *role;         /* root function argument -> 1 parameter, 0 input */
    uint32_t *funcs;       /* func.func op ids */
    const char **fnames;
    bool *called;
    uint32_t n_funcs;
    uint32_t depth;
    uint32_t peak_op;      /* the innermost op at the peak of the last block walked */
    uint32_t max_instances; /* ops a walk may visit (c->s.n_ops counts them) */
} cctx;

static cm_status fail_oom(cctx *x)
{
    if (x->st == CM_OK) {
        x->st = cm_error_set(x->err, CM_ENOMEM, NULL, "out of memory in the cost model");
    }
    return x->st;
}

static const sp_mesh *mesh_of(cctx *x, const sp_sharding *s)
{
    if (s == NULL) {
        return NULL;
    }
    if (s->mesh != NULL) {
        return s->mesh;
    }
    if (s->mesh_name == NULL) {
        return NULL;
    }
    if (x->mesh_name != s->mesh_name &&
        (x->mesh_name == NULL || strcmp(x->mesh_name, s->mesh_name) != 0)) {
        x->mesh_name = s->mesh_name;
        x->mesh = sp_module_mesh(x->m, s->mesh_name);
    }
    return x->mesh;
}

static int64_t axis_size(const sp_mesh *mesh, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        return r->size > 0 ? r->size : 1;
    }
    int32_t i = mesh != NULL ? sp_mesh_axis_index(mesh, r->name) : -1;
    int64_t z = i >= 0 ? mesh->axes[i].size : r->size;
    return z > 0 ? z : 1; /* an axis without devices divides nothing (and never by zero) */
}

static const sp_sharding unset_sharding; /* marks a cache slot not yet filled */

/* The sharding of v through the per-value cache (built lazily). */
static const sp_sharding *shard_of(cctx *x, uint32_t v)
{
    if (x->shard == NULL) {
        return sp_value_sharding_partitioned(x->m, v);
    }
    if (x->shard[v] == &unset_sharding) {
        x->shard[v] = sp_value_sharding_partitioned(x->m, v);
    }
    return x->shard[v];
}

/* Local (per-device) element count of a tensor of type t under sharding s:
 * ceil division of each dimension by the product of its axes. Dynamic
 * dimensions count as 1. */
static double local_elems(cctx *x, const sp_type *t, const sp_sharding *s)
{
    if (t->kind != SP_TYPE_TENSOR) {
        return 0;
    }
    const sp_mesh *mesh = mesh_of(x, s);
    double n = 1;
    for (uint32_t d = 0; d < t->rank; d++) {
        int64_t dim = t->dims[d];
        if (dim == SP_DIM_DYNAMIC) {
            dim = 1;
        }
        int64_t k = 1;
        for (uint32_t a = 0; s != NULL && d < s->rank && a < s->dims[d].n_axes; a++) {
            int64_t z = axis_size(mesh, &s->dims[d].axes[a]);
            if (!cm_mul_i64(k, z, &k)) {
                k = INT64_MAX;
                break;
            }
        }
        n *= (double)(dim / k + (dim % k != 0));
    }
    return n;
}

static double val_elems(cctx *x, uint32_t v)
{
    if (x->elems == NULL) {
        return local_elems(x, sp_value_type(x->m, v), shard_of(x, v));
    }
    if (x->elems[v] < 0) {
        x->elems[v] = local_elems(x, sp_value_type(x->m, v), shard_of(x, v));
    }
    return x->elems[v];
}

static double val_bytes(cctx *x, uint32_t v)
{
    const sp_type *t = sp_value_type(x->m, v);
    return t->kind == SP_TYPE_TENSOR ? val_elems(x, v) * (double)sp_elem_bytes(t->elem) : 0;
}

double sp_cost_value_bytes(const sp_module *m, uint32_t v)
{
    cctx x;
    memset(&x, 0, sizeof x);
    x.m = (sp_module *)(uintptr_t)m; /* read only: mesh_of only looks up */
    return val_bytes(&x, v);
}

/* Local size of dimension d of value v. */
static double local_dim(cctx *x, uint32_t v, uint32_t d)
{
    const sp_type *t = sp_value_type(x->m, v);
    if (t->kind != SP_TYPE_TENSOR || d >= t->rank) {
        return 1;
    }
    const sp_sharding *s = shard_of(x, v);
    const sp_mesh *mesh = mesh_of(x, s);
    int64_t dim = t->dims[d] == SP_DIM_DYNAMIC ? 1 : t->dims[d], k = 1;
    for (uint32_t a = 0; s != NULL && d < s->rank && a < s->dims[d].n_axes; a++) {
        if (!cm_mul_i64(k, axis_size(mesh, &s->dims[d].axes[a]), &k)) {
            return 1;
        }
    }
    return (double)(dim / k + (dim % k != 0));
}

static sp_cost_dtype dtype_of(sp_elem e)
{
    switch (e) {
    case SP_ELEM_F64:
    case SP_ELEM_C128:
        return SP_COST_F64;
    case SP_ELEM_F32:
    case SP_ELEM_C64:
        return SP_COST_F32;
    case SP_ELEM_BF16:
        return SP_COST_BF16;
    case SP_ELEM_F16:
        return SP_COST_F16;
    case SP_ELEM_F8E4M3FN:
    case SP_ELEM_F8E5M2:
    case SP_ELEM_F4E2M1FN:
    case SP_ELEM_F6E2M3FN:
    case SP_ELEM_F6E3M2FN:
    case SP_ELEM_F8E3M4:
    case SP_ELEM_F8E4M3:
    case SP_ELEM_F8E4M3B11FNUZ:
    case SP_ELEM_F8E4M3FNUZ:
    case SP_ELEM_F8E5M2FNUZ:
    case SP_ELEM_F8E8M0FNU:
        return SP_COST_F8;
    case SP_ELEM_I2:
    case SP_ELEM_I4:
    case SP_ELEM_I8:
    case SP_ELEM_UI2:
    case SP_ELEM_UI4:
    case SP_ELEM_UI8:
        return SP_COST_INT8;
    default:
        return SP_COST_INT32;
    }
}

/* ---- collectives ------------------------------------------------------------------ */

typedef struct axset {
    const sp_axis_ref *refs[SP_COST_MAX_COLL_AXES];
    uint32_t n;
} axset;

static bool ref_eq(const sp_axis_ref *a, const sp_axis_ref *b)
{
    return strcmp(a->name, b->name) == 0 && a->pre_size == b->pre_size &&
           (a->pre_size == 0 || a->size == b->size);
}

static void axset_add(axset *s, const sp_axis_ref *r)
{
    for (uint32_t i = 0; i < s->n; i++) {
        if (ref_eq(s->refs[i], r)) {
            return;
        }
    }
    if (s->n < SP_COST_MAX_COLL_AXES) {
        s->refs[s->n++] = r;
    }
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap) {
        return true;
    }
    uint32_t c = *cap ? *cap : 64;
    while (c < need) {
        c *= 2;
    }
    void *q = cm_realloc(*p, elem * c);
    if (q == NULL) {
        return false;
    }
    *p = q;
    *cap = c;
    return true;
}

/* Adds bytes and time to the per-axis-set totals under key. */
static void axis_total(cctx *x, const char *key, double bytes, double time_s, double runs)
{
    sp_cost *c = x->c;
    for (uint32_t i = 0; i < c->n_axes; i++) {
        if (strcmp(c->axes[i].axes, key) == 0) {
            c->axes[i].bytes += bytes;
            c->axes[i].time_s += time_s;
            c->axes[i].n_colls++;
            c->axes[i].runs += runs;
            return;
        }
    }
    if (!grow((void **)&c->axes, &c->cap_axes, c->n_axes + 1, sizeof(sp_cost_axis))) {
        fail_oom(x);
        return;
    }
    sp_cost_axis *a = &c->axes[c->n_axes++];
    memset(a, 0, sizeof *a);
    snprintf(a->axes, sizeof a->axes, "%s", key);
    a->bytes = bytes;
    a->time_s = time_s;
    a->n_colls = 1;
    a->runs = runs;
}

/* Records one collective over the axes in s (resolved against mesh). S is
 * the tensor size the kind's formula names (docs/cost-model.md):
 *   all_reduce      2(n-1)/n * S   (ring; S = the reduced tensor)
 *   all_gather      (n-1)/n * S    (S = the gathered result)
 *   reduce_scatter  (n-1)/n * S    (S = the input)
 *   all_to_all      (n-1)/n * S
 *   permute         S
 *   all_slice       0 */
static void add_coll(cctx *x, uint32_t op, sp_coll_kind kind, bool implied, uint32_t operand,
                     const axset *s, const sp_mesh *mesh, int64_t group_override, double S,
                     double mult)
{
    if (x->st != CM_OK || (s->n == 0 && group_override <= 1 && kind != SP_COLL_PERMUTE)) {
        return;
    }
    sp_cost *c = x->c;
    if (!grow((void **)&c->colls, &c->cap_colls, c->n_colls + 1, sizeof(sp_cost_coll))) {
        fail_oom(x);
        return;
    }
    sp_cost_coll *k = &c->colls[c->n_colls];
    memset(k, 0, sizeof *k);
    k->op = op;
    k->kind = kind;
    k->implied = implied;
    k->operand = operand;
    k->count = mult;
    int64_t n = 1;
    double bw = 0, lat = 0;
    char key[128] = "";
    size_t kl = 0;
    /* axes in mesh order, so equal sets get equal keys */
    const sp_axis_ref *sorted[SP_COST_MAX_COLL_AXES];
    uint32_t ns = s->n;
    memcpy(sorted, s->refs, sizeof(sorted[0]) * ns);
    for (uint32_t i = 1; i < ns; i++) {
        for (uint32_t j = i; j > 0; j--) {
            int32_t a = mesh != NULL ? sp_mesh_axis_index(mesh, sorted[j - 1]->name) : 0;
            int32_t b = mesh != NULL ? sp_mesh_axis_index(mesh, sorted[j]->name) : 0;
            if (a < b || (a == b && sorted[j - 1]->pre_size <= sorted[j]->pre_size)) {
                break;
            }
            const sp_axis_ref *t = sorted[j - 1];
            sorted[j - 1] = sorted[j];
            sorted[j] = t;
        }
    }
    for (uint32_t i = 0; i < ns; i++) {
        const sp_axis_ref *r = sorted[i];
        k->axes[k->n_axes++] = r->name;
        int64_t z = axis_size(mesh, r);
        n = cm_mul_i64(n, z, &n) ? n : INT64_MAX;
        const sp_profile_link *l = sp_profile_link_of(x->p, r->name);
        if (bw == 0 || (l->bandwidth > 0 && l->bandwidth < bw)) {
            bw = l->bandwidth;
        }
        lat = l->latency > lat ? l->latency : lat;
        int w;
        if (r->pre_size > 0) {
            w = snprintf(key + kl, sizeof key - kl, "%s%s:(%lld)%lld", i > 0 ? "," : "", r->name,
                         (long long)r->pre_size, (long long)r->size);
        } else {
            w = snprintf(key + kl, sizeof key - kl, "%s%s", i > 0 ? "," : "", r->name);
        }
        kl = w > 0 && kl + (size_t)w < sizeof key ? kl + (size_t)w : sizeof key - 1;
    }
    if (ns == 0) {
        bw = x->p->link.bandwidth;
        lat = x->p->link.latency;
        snprintf(key, sizeof key, "%s", group_override > 1 ? "(replica groups)" : "(none)");
        if (group_override > 1) {
            n = group_override;
        }
    }
    if (n <= 1 && kind != SP_COLL_PERMUTE) {
        /* a group of one device (axes of size 1, as an 8x1 mesh has) moves
         * nothing and runs nothing: XLA drops it, so it is not counted */
        return;
    }
    double fn = (double)n, bytes = 0, steps = 0;
    switch (kind) {
    case SP_COLL_ALL_REDUCE:
        bytes = 2.0 * (fn - 1) / fn * S;
        steps = 2.0 * (fn - 1);
        break;
    case SP_COLL_ALL_GATHER:
    case SP_COLL_REDUCE_SCATTER:
    case SP_COLL_ALL_TO_ALL:
        bytes = (fn - 1) / fn * S;
        steps = fn - 1;
        break;
    case SP_COLL_PERMUTE:
        bytes = S;
        steps = 1;
        break;
    case SP_COLL_ALL_SLICE:
    case SP_COLL_N_KINDS:
        break;
    }
    k->group = n;
    k->tensor_bytes = S;
    k->bytes = bytes;
    k->time_s = bytes > 0 ? steps * lat + (bw > 0 ? bytes / bw : 0) : 0;
    c->n_colls++;
    c->s.comm_bytes += bytes * mult;
    c->s.comm_s += k->time_s * mult;
    if ((unsigned)kind < SP_COLL_N_KINDS) {
        c->s.kind_bytes[kind] += bytes * mult;
        c->s.kind_s[kind] += k->time_s * mult;
        c->s.kind_colls[kind]++;
    }
    axis_total(x, key, bytes * mult, k->time_s * mult, mult);
}

/* Axis refs of a sharding laid out per dimension (dims[d] with n[d] refs). */
typedef struct dimaxes {
    const sp_axis_ref *refs[SP_MAX_RANK][MAX_DIM_AXES];
    uint32_t n[SP_MAX_RANK];
    uint32_t rank;
} dimaxes;

static void dimaxes_of(const sp_sharding *s, uint32_t rank, dimaxes *out)
{
    out->rank = rank;
    for (uint32_t d = 0; d < rank; d++) {
        out->n[d] = 0;
        for (uint32_t a = 0; s != NULL && d < s->rank && a < s->dims[d].n_axes; a++) {
            if (out->n[d] < MAX_DIM_AXES) {
                out->refs[d][out->n[d]++] = &s->dims[d].axes[a];
            }
        }
    }
}

/* What resharding a tensor of S local bytes from src to dst costs: axes of
 * src absent from dst are all-gathered, axes that move to another dimension
 * are exchanged all-to-all, axes only in dst are sliced locally (free). */
static void reshard_cost(cctx *x, uint32_t op, uint32_t operand, const dimaxes *src,
                         const dimaxes *dst, const sp_mesh *mesh, double S, double mult)
{
    axset gather = {{0}, 0}, a2a = {{0}, 0};
    for (uint32_t d = 0; d < src->rank; d++) {
        for (uint32_t i = 0; i < src->n[d]; i++) {
            const sp_axis_ref *r = src->refs[d][i];
            int where = -1;
            for (uint32_t e = 0; e < dst->rank && where < 0; e++) {
                for (uint32_t j = 0; j < dst->n[e]; j++) {
                    if (ref_eq(r, dst->refs[e][j])) {
                        where = (int)e;
                        break;
                    }
                }
            }
            if (where < 0) {
                axset_add(&gather, r);
            } else if ((uint32_t)where != d) {
                axset_add(&a2a, r);
            }
        }
    }
    if (a2a.n > 0) {
        add_coll(x, op, SP_COLL_ALL_TO_ALL, true, operand, &a2a, mesh, 0, S, mult);
    }
    if (gather.n > 0) {
        double n = 1;
        for (uint32_t i = 0; i < gather.n; i++) {
            n *= (double)axis_size(mesh, gather.refs[i]);
        }
        add_coll(x, op, SP_COLL_ALL_GATHER, true, operand, &gather, mesh, 0, S * n, mult);
    }
}

/* Reshard of value v to sharding dst (a constraint or sdy.reshard). */
static void reshard_value(cctx *x, uint32_t op, uint32_t operand, uint32_t v,
                          const sp_sharding *dst, double mult)
{
    const sp_type *t = sp_value_type(x->m, v);
    if (t->kind != SP_TYPE_TENSOR || t->rank > SP_MAX_RANK) {
        return;
    }
    const sp_sharding *src = shard_of(x, v);
    dimaxes a, b;
    dimaxes_of(src, t->rank, &a);
    dimaxes_of(dst, t->rank, &b);
    const sp_mesh *mesh = mesh_of(x, src != NULL ? src : dst);
    reshard_cost(x, op, operand, &a, &b, mesh, val_bytes(x, v), mult);
}

/* An axis list attribute (one list or one list per dimension) into s. */
static void axes_of_attr(const sp_attr *a, axset *s)
{
    if (a == NULL) {
        return;
    }
    if (a->kind == SP_ATTR_AXIS_LIST) {
        for (uint32_t i = 0; i < a->u.axes.n; i++) {
            axset_add(s, &a->u.axes.axes[i]);
        }
    } else if (a->kind == SP_ATTR_AXIS_LISTS) {
        for (uint32_t d = 0; d < a->u.axis_lists.n; d++) {
            for (uint32_t i = 0; i < a->u.axis_lists.items[d].n; i++) {
                axset_add(s, &a->u.axis_lists.items[d].axes[i]);
            }
        }
    }
}

/* Group size of a stablehlo collective from replica_groups (dense [g, n]). */
static int64_t replica_group_size(cctx *x, const sp_op *o)
{
    const sp_attr *a = sp_attrs_get(o->attrs, o->n_attrs, "replica_groups");
    if (a == NULL) {
        a = sp_attrs_get(o->attrs, o->n_attrs, "source_target_pairs");
    }
    if (a == NULL || a->kind != SP_ATTR_DENSE) {
        return 1;
    }
    const sp_type *t = &x->m->types[a->u.dense.type];
    return t->kind == SP_TYPE_TENSOR && t->rank == 2 ? t->dims[1] : 1;
}

/* Communication of an explicit collective op. */
static void explicit_coll(cctx *x, uint32_t id, double mult)
{
    const sp_op *o = &x->m->ops[id];
    if (o->n_operands < 1 || o->n_results < 1) {
        return;
    }
    uint32_t in = o->operands[0], res = o->first_result;
    const sp_sharding *out_s = shard_of(x, res);
    const sp_mesh *mesh = mesh_of(x, out_s != NULL ? out_s : shard_of(x, in));
    axset s = {{0}, 0};
    switch (o->kind) {
    case SP_OP_SDY_ALL_GATHER:
        axes_of_attr(sp_attrs_get(o->attrs, o->n_attrs, "gathering_axes"), &s);
        add_coll(x, id, SP_COLL_ALL_GATHER, false, SP_NONE, &s, mesh, 0, val_bytes(x, res), mult);
        break;
    case SP_OP_SDY_ALL_SLICE:
        axes_of_attr(sp_attrs_get(o->attrs, o->n_attrs, "slicing_axes"), &s);
        add_coll(x, id, SP_COLL_ALL_SLICE, false, SP_NONE, &s, mesh, 0, val_bytes(x, res), mult);
        break;
    case SP_OP_SDY_ALL_REDUCE:
        axes_of_attr(sp_attrs_get(o->attrs, o->n_attrs, "reduction_axes"), &s);
        add_coll(x, id, SP_COLL_ALL_REDUCE, false, SP_NONE, &s, mesh, 0, val_bytes(x, res), mult);
        break;
    case SP_OP_SDY_REDUCE_SCATTER:
        axes_of_attr(sp_attrs_get(o->attrs, o->n_attrs, "reduce_scatter_axes"), &s);
        add_coll(x, id, SP_COLL_REDUCE_SCATTER, false, SP_NONE, &s, mesh, 0, val_bytes(x, in),
                 mult);
        break;
    case SP_OP_SDY_ALL_TO_ALL: {
        const sp_attr *a = sp_attrs_get(o->attrs, o->n_attrs, "params");
        for (uint32_t i = 0; a != NULL && a->kind == SP_ATTR_ALL_TO_ALL && i < a->u.a2a.n; i++) {
            axset one = {{0}, 0};
            const sp_axis_list *l = &a->u.a2a.items[i].axes;
            for (uint32_t k = 0; k < l->n; k++) {
                axset_add(&one, &l->axes[k]);
            }
            add_coll(x, id, SP_COLL_ALL_TO_ALL, false, SP_NONE, &one, mesh, 0, val_bytes(x, in),
                     mult);
        }
        break;
    }
    case SP_OP_SDY_COLLECTIVE_PERMUTE: {
        for (uint32_t d = 0; out_s != NULL && d < out_s->rank; d++) {
            for (uint32_t i = 0; i < out_s->dims[d].n_axes; i++) {
                axset_add(&s, &out_s->dims[d].axes[i]);
            }
        }
        add_coll(x, id, SP_COLL_PERMUTE, false, SP_NONE, &s, mesh, 0, val_bytes(x, res), mult);
        break;
    }
    case SP_OP_SDY_RESHARD: {
        /* an explicit op whose lowering is estimated like an implied reshard */
        uint32_t before = x->c->n_colls;
        reshard_value(x, id, 0, in, out_s, mult);
        for (uint32_t i = before; i < x->c->n_colls; i++) {
            x->c->colls[i].implied = false;
        }
        break;
    }
    case SP_OP_ALL_REDUCE:
        add_coll(x, id, SP_COLL_ALL_REDUCE, false, SP_NONE, &s, NULL, replica_group_size(x, o),
                 val_bytes(x, res), mult);
        break;
    case SP_OP_ALL_GATHER:
        add_coll(x, id, SP_COLL_ALL_GATHER, false, SP_NONE, &s, NULL, replica_group_size(x, o),
                 val_bytes(x, res), mult);
        break;
    case SP_OP_REDUCE_SCATTER:
        add_coll(x, id, SP_COLL_REDUCE_SCATTER, false, SP_NONE, &s, NULL,
                 replica_group_size(x, o), val_bytes(x, in), mult);
        break;
    case SP_OP_ALL_TO_ALL:
        add_coll(x, id, SP_COLL_ALL_TO_ALL, false, SP_NONE, &s, NULL, replica_group_size(x, o),
                 val_bytes(x, in), mult);
        break;
    case SP_OP_COLLECTIVE_PERMUTE:
        add_coll(x, id, SP_COLL_PERMUTE, false, SP_NONE, &s, NULL, 2, val_bytes(x, res), mult);
        break;
    default:
        break;
    }
}

/* ---- implied communication ------------------------------------------------------------ */

/* Splits the axes of one (compound) dimension among its factors, major to
 * minor: an axis goes to the current factor while it divides what is left of
 * the factor's size, else to the next factor. */
static void split_dim(const sp_dim_mapping *dm, const sp_rule *rule, const sp_axis_ref *const *refs,
                      uint32_t n_refs, const sp_mesh *mesh, axset *fax, bool *decided,
                      bool only_undecided)
{
    uint32_t fi = 0;
    int64_t left = dm->n_factors > 0 ? rule->factor_sizes[dm->factors[0]] : 1;
    for (uint32_t f = 0; f < dm->n_factors; f++) {
        uint32_t k = dm->factors[f];
        if (k < MAX_FACTORS && !(only_undecided && decided[k])) {
            fax[k].n = 0;
        }
    }
    for (uint32_t i = 0; i < n_refs && fi < dm->n_factors; i++) {
        int64_t z = axis_size(mesh, refs[i]);
        while (fi < dm->n_factors && dm->n_factors > 1 && (z > left || left % z != 0)) {
            fi++;
            left = fi < dm->n_factors ? rule->factor_sizes[dm->factors[fi]] : 1;
        }
        if (fi >= dm->n_factors) {
            break;
        }
        uint32_t k = dm->factors[fi];
        if (k < MAX_FACTORS && !(only_undecided && decided[k])) {
            axset_add(&fax[k], refs[i]);
        }
        left = z > 0 ? left / z : left;
    }
    for (uint32_t f = 0; f < dm->n_factors; f++) {
        uint32_t k = dm->factors[f];
        if (k < MAX_FACTORS && !only_undecided) {
            decided[k] = true;
        }
    }
}

/* The communication an op's shardings imply once partitioned: operands
 * resharded to the factor shardings its results fix, and an all-reduce of
 * the results over the axes of sharded reduction factors. */
static void implied_rule(cctx *x, uint32_t id, const sp_rule *rule, double mult)
{
    const sp_op *o = &x->m->ops[id];
    if (rule->n_operands != o->n_operands || rule->n_results != o->n_results ||
        rule->n_factors > MAX_FACTORS) {
        return;
    }
    axset fax[MAX_FACTORS];
    bool decided[MAX_FACTORS];
    memset(decided, 0, sizeof decided);
    for (uint32_t f = 0; f < rule->n_factors; f++) {
        fax[f].n = 0;
    }
    const sp_mesh *mesh = NULL;
    /* results decide their factors */
    for (uint32_t r = 0; r < rule->n_results; r++) {
        const sp_tensor_mapping *tm = &rule->results[r];
        const sp_sharding *s = shard_of(x, o->first_result + r);
        mesh = mesh != NULL ? mesh : mesh_of(x, s);
        if (tm->rank > SP_MAX_RANK) {
            return;
        }
        dimaxes da;
        dimaxes_of(s, tm->rank, &da);
        for (uint32_t d = 0; d < tm->rank; d++) {
            bool fresh = true;
            for (uint32_t f = 0; f < tm->dims[d].n_factors; f++) {
                fresh = fresh && tm->dims[d].factors[f] < MAX_FACTORS &&
                        !decided[tm->dims[d].factors[f]];
            }
            if (fresh) {
                split_dim(&tm->dims[d], rule, da.refs[d], da.n[d], mesh, fax, decided, false);
            }
        }
    }
    /* reduction and operand-only factors come from the first operand that shards them */
    for (uint32_t i = 0; i < rule->n_operands; i++) {
        const sp_tensor_mapping *tm = &rule->operands[i];
        const sp_sharding *s = shard_of(x, o->operands[i]);
        if (s == NULL || tm->rank > SP_MAX_RANK) {
            continue;
        }
        mesh = mesh != NULL ? mesh : mesh_of(x, s);
        dimaxes da;
        dimaxes_of(s, tm->rank, &da);
        for (uint32_t d = 0; d < tm->rank; d++) {
            if (da.n[d] > 0) {
                split_dim(&tm->dims[d], rule, da.refs[d], da.n[d], mesh, fax, decided, true);
                for (uint32_t f = 0; f < tm->dims[d].n_factors; f++) {
                    uint32_t k = tm->dims[d].factors[f];
                    if (k < MAX_FACTORS && fax[k].n > 0) {
                        decided[k] = true;
                    }
                }
            }
        }
    }
    for (uint32_t f = 0; f < rule->n_factors; f++) {
        if (rule->factor_kind[f] == SP_FACTOR_NEED_REPLICATION) {
            fax[f].n = 0;
        }
    }
    /* operands */
    for (uint32_t i = 0; i < rule->n_operands; i++) {
        const sp_tensor_mapping *tm = &rule->operands[i];
        uint32_t v = o->operands[i];
        const sp_type *t = sp_value_type(x->m, v);
        if (t->kind != SP_TYPE_TENSOR || t->rank != tm->rank || tm->rank > SP_MAX_RANK) {
            continue;
        }
        const sp_sharding *s = shard_of(x, v);
        dimaxes have, need;
        dimaxes_of(s, tm->rank, &have);
        need.rank = tm->rank;
        for (uint32_t d = 0; d < tm->rank; d++) {
            need.n[d] = 0;
            for (uint32_t f = 0; f < tm->dims[d].n_factors; f++) {
                const axset *fa = &fax[tm->dims[d].factors[f]];
                for (uint32_t k = 0; k < fa->n && need.n[d] < MAX_DIM_AXES; k++) {
                    need.refs[d][need.n[d]++] = fa->refs[k];
                }
            }
        }
        reshard_cost(x, id, i, &have, &need, mesh != NULL ? mesh : mesh_of(x, s), val_bytes(x, v),
                     mult);
    }
    /* reductions */
    axset red = {{0}, 0};
    for (uint32_t f = 0; f < rule->n_factors; f++) {
        if (rule->factor_kind[f] == SP_FACTOR_REDUCTION) {
            for (uint32_t k = 0; k < fax[f].n; k++) {
                axset_add(&red, fax[f].refs[k]);
            }
        }
    }
    if (red.n == 0) {
        return;
    }
    for (uint32_t r = 0; r < o->n_results; r++) {
        const sp_sharding *s = shard_of(x, o->first_result + r);
        axset keep = {{0}, 0};
        for (uint32_t k = 0; k < red.n; k++) {
            bool unreduced = false;
            for (uint32_t u = 0; s != NULL && u < s->n_unreduced; u++) {
                unreduced = unreduced || ref_eq(&s->unreduced[u], red.refs[k]);
            }
            if (!unreduced) {
                axset_add(&keep, red.refs[k]);
            }
        }
        add_coll(x, id, SP_COLL_ALL_REDUCE, true, SP_NONE, &keep, mesh,
                 0, val_bytes(x, o->first_result + r), mult);
    }
}

static void implied_op(cctx *x, uint32_t id, double mult)
{
    const sp_op *o = &x->m->ops[id];
    sp_op_kind k = (sp_op_kind)o->kind;
    switch (k) {
    case SP_OP_SDY_SHARDING_CONSTRAINT:
        if (o->n_operands == 1 && o->n_results == 1) {
            reshard_value(x, id, 0, o->operands[0], shard_of(x, o->first_result), mult);
        }
        return;
    case SP_OP_FUNC_FUNC:
    case SP_OP_FUNC_CALL:
    case SP_OP_FUNC_RETURN:
    case SP_OP_RETURN:
    case SP_OP_SDY_RETURN:
    case SP_OP_SDY_MESH:
    case SP_OP_SDY_SHARDING_GROUP:
    case SP_OP_SDY_DATA_FLOW_EDGE:
    case SP_OP_SDY_FUNC_DATA_FLOW_EDGE:
    case SP_OP_SDY_PROPAGATION_BARRIER:
    case SP_OP_SDY_MANUAL_COMPUTATION:
    case SP_OP_SDY_NAMED_COMPUTATION:
    case SP_OP_CONSTANT:
    case SP_OP_SDY_CONSTANT:
    case SP_OP_IOTA:
    case SP_OP_WHILE:
    case SP_OP_CASE:
    case SP_OP_IF:
    case SP_OP_OPTIMIZATION_BARRIER:
    case SP_OP_GET_TUPLE_ELEMENT:
    case SP_OP_TUPLE:
        return;
    default:
        break;
    }
    if (o->n_results == 0) {
        return;
    }
    /* element-wise ops: every operand of the result's rank should match it */
    if (sp_op_is_elementwise(k) && o->n_results == 1) {
        uint32_t res = o->first_result;
        const sp_type *rt = sp_value_type(x->m, res);
        if (rt->kind != SP_TYPE_TENSOR || rt->rank > SP_MAX_RANK) {
            return;
        }
        const sp_sharding *rs = shard_of(x, res);
        dimaxes need;
        dimaxes_of(rs, rt->rank, &need);
        for (uint32_t i = 0; i < o->n_operands; i++) {
            uint32_t v = o->operands[i];
            const sp_type *t = sp_value_type(x->m, v);
            if (t->kind != SP_TYPE_TENSOR || t->rank != rt->rank) {
                continue;
            }
            const sp_sharding *s = shard_of(x, v);
            if (s == rs) {
                continue;
            }
            dimaxes have;
            dimaxes_of(s, t->rank, &have);
            reshard_cost(x, id, i, &have, &need, mesh_of(x, s != NULL ? s : rs), val_bytes(x, v),
                         mult);
        }
        return;
    }
    /* everything else through its sharding rule (kept on the op, or derived) */
    bool any = false;
    for (uint32_t i = 0; i < o->n_operands && !any; i++) {
        any = shard_of(x, o->operands[i]) != NULL;
    }
    for (uint32_t r = 0; r < o->n_results && !any; r++) {
        any = shard_of(x, o->first_result + r) != NULL;
    }
    if (!any) {
        return;
    }
    const sp_attr *ra = sp_attrs_get(o->attrs, o->n_attrs, "sdy.sharding_rule");
    const sp_rule *rule = ra != NULL && ra->kind == SP_ATTR_RULE ? ra->u.rule : NULL;
    if (rule == NULL) {
        sp_rule_opts ro = {false, x->o->custom, false};
        sp_rule *nr = NULL;
        cm_error e2;
        cm_error_clear(&e2);
        cm_status st = sp_rule_for_op(x->m, id, &ro, &nr, NULL, &e2);
        if (st == CM_ENOMEM) {
            fail_oom(x);
            return;
        }
        rule = st == CM_OK ? nr : NULL; /* a malformed op costs no communication */
    }
    if (rule != NULL) {
        implied_rule(x, id, rule, mult);
    }
}

/* ---- FLOPs and traffic -------------------------------------------------------------- */

static double sum_elems(cctx *x, const uint32_t *vals, uint32_t n)
{
    double s = 0;
    for (uint32_t i = 0; i < n; i++) {
        s += val_elems(x, vals[i]);
    }
    return s;
}

/* FLOPs of one op from local shapes (docs/cost-model.md lists them):
 * class 0 dot/convolution, 1 element-wise, 2 reduction, 3 other. */
static double op_flops(cctx *x, uint32_t id, int *cls)
{
    const sp_op *o = &x->m->ops[id];
    sp_op_kind k = (sp_op_kind)o->kind;
    *cls = 3;
    if (o->n_results == 0) {
        return 0;
    }
    uint32_t res = o->first_result;
    switch (k) {
    case SP_OP_DOT_GENERAL:
    case SP_OP_DOT: {
        /* the local contracted size (1 when the dimension numbers are bad) */
        *cls = 0;
        if (o->n_operands != 2) {
            return 0;
        }
        sp_dot_dims dd;
        double kk = 1;
        if (sp_dot_dims_get(x->m, id, &dd, NULL) == CM_OK) {
            for (uint32_t i = 0; i < dd.n_contract; i++) {
                double a = local_dim(x, o->operands[0], (uint32_t)dd.lhs_contract[i]);
                double b = local_dim(x, o->operands[1], (uint32_t)dd.rhs_contract[i]);
                kk *= a < b ? a : b;
            }
        }
        return 2.0 * val_elems(x, res) * kk;
    }
    case SP_OP_CONVOLUTION: {
        /* the local kernel per output feature (the whole kernel when the
         * dimension numbers are bad) */
        *cls = 0;
        if (o->n_operands != 2) {
            return 0;
        }
        sp_conv_dims cd;
        double ker = val_elems(x, o->operands[1]);
        if (sp_conv_dims_get(x->m, id, &cd, NULL) == CM_OK) {
            double of = local_dim(x, o->operands[1], (uint32_t)cd.kernel_output_feature);
            ker = of > 0 ? ker / of : ker;
        }
        return 2.0 * val_elems(x, res) * ker;
    }
    case SP_OP_REDUCE:
        *cls = 2;
        return sum_elems(x, o->operands, o->n_operands / 2);
    case SP_OP_REDUCE_WINDOW: {
        *cls = 2;
        sp_window w;
        double win = 1;
        if (sp_window_get(x->m, id, &w, NULL) == CM_OK) {
            for (uint32_t i = 0; i < w.n_dims; i++) {
                win *= (double)w.dims[i];
            }
        }
        return sum_elems(x, &o->first_result, 1) * win * (double)(o->n_results > 0 ? 1 : 0) *
               (double)(o->n_operands / 2 > 0 ? o->n_operands / 2 : 1);
    }
    case SP_OP_SELECT_AND_SCATTER:
        *cls = 2;
        return o->n_operands > 0 ? 2.0 * val_elems(x, o->operands[0]) : 0;
    case SP_OP_BATCH_NORM_TRAINING:
    case SP_OP_BATCH_NORM_INFERENCE:
    case SP_OP_BATCH_NORM_GRAD:
        *cls = 2;
        return o->n_operands > 0 ? 5.0 * val_elems(x, o->operands[0]) : 0;
    case SP_OP_SORT: {
        const sp_type *t = sp_value_type(x->m, res);
        const sp_attr *d = sp_attrs_get(o->attrs, o->n_attrs, "dimension");
        uint32_t dim = d != NULL && d->kind == SP_ATTR_INT && d->u.i.v >= 0 ? (uint32_t)d->u.i.v
                                                                             : 0;
        double len = local_dim(x, res, dim < t->rank ? dim : 0);
        return val_elems(x, res) * (len > 1 ? log2(len) : 1);
    }
    case SP_OP_SCATTER:
        *cls = 1;
        return o->n_operands >= 3 ? val_elems(x, o->operands[o->n_operands - 1]) : 0;
    case SP_OP_CHOLESKY: {
        const sp_type *t = sp_value_type(x->m, res);
        double n = t->rank >= 1 ? local_dim(x, res, t->rank - 1) : 1;
        double e = val_elems(x, res);
        return n > 0 ? e / (n * n) * n * n * n / 3.0 : 0;
    }
    case SP_OP_TRIANGULAR_SOLVE: {
        if (o->n_operands != 2) {
            return 0;
        }
        const sp_type *t = sp_value_type(x->m, o->operands[0]);
        double n = t->rank >= 1 ? local_dim(x, o->operands[0], t->rank - 1) : 1;
        return val_elems(x, res) * n;
    }
    case SP_OP_FFT: {
        const sp_type *t = sp_value_type(x->m, res);
        double n = t->rank >= 1 ? local_dim(x, res, t->rank - 1) : 1;
        return 5.0 * val_elems(x, res) * (n > 1 ? log2(n) : 1);
    }
    default:
        break;
    }
    if (sp_op_is_elementwise(k)) {
        *cls = 1;
        double s = 0;
        for (uint32_t r = 0; r < o->n_results; r++) {
            s += val_elems(x, res + r);
        }
        return s;
    }
    return 0;
}

/* The m x k by k x n product each call of dot op id multiplies (local
 * shapes; the batch dimensions count calls); false for other ops or bad
 * dimension numbers. */
static bool dot_call(cctx *x, uint32_t id, double *m, double *k, double *n)
{
    const sp_op *o = &x->m->ops[id];
    sp_dot_dims dd;
    if ((o->kind != SP_OP_DOT_GENERAL && o->kind != SP_OP_DOT) || o->n_operands != 2 ||
        o->n_results != 1 || sp_dot_dims_get(x->m, id, &dd, NULL) != CM_OK) {
        return false;
    }
    double b = 1, kk = 1;
    for (uint32_t i = 0; i < dd.n_batch; i++) {
        b *= local_dim(x, o->operands[0], (uint32_t)dd.lhs_batch[i]);
    }
    for (uint32_t i = 0; i < dd.n_contract; i++) {
        kk *= local_dim(x, o->operands[0], (uint32_t)dd.lhs_contract[i]);
    }
    double lhs = val_elems(x, o->operands[0]), res = val_elems(x, o->first_result);
    if (!(b > 0 && kk > 0 && lhs > 0)) {
        return false;
    }
    *m = lhs / (b * kk);
    *k = kk;
    *n = res / (b * *m);
    return *n > 0;
}

/* Element-wise ops the executor evaluates with a libm call per element
 * (XLA's cost analysis counts these as transcendentals). */
static bool is_transcendental(sp_op_kind k)
{
    switch (k) {
    case SP_OP_EXPONENTIAL:
    case SP_OP_EXPONENTIAL_MINUS_ONE:
    case SP_OP_LOG:
    case SP_OP_LOG_PLUS_ONE:
    case SP_OP_LOGISTIC:
    case SP_OP_TANH:
    case SP_OP_POWER:
    case SP_OP_SINE:
    case SP_OP_COSINE:
    case SP_OP_TAN:
    case SP_OP_ATAN2:
    case SP_OP_CBRT:
        return true;
    default:
        return false;
    }
}

/* Ops that run no kernel: no FLOPs, no memory traffic. */
static bool is_free_op(sp_op_kind k)
{
    switch (k) {
    case SP_OP_FUNC_FUNC:
    case SP_OP_FUNC_CALL:
    case SP_OP_FUNC_RETURN:
    case SP_OP_RETURN:
    case SP_OP_CONSTANT:
    case SP_OP_SDY_CONSTANT:
    case SP_OP_GET_TUPLE_ELEMENT:
    case SP_OP_TUPLE:
    case SP_OP_OPTIMIZATION_BARRIER:
    case SP_OP_WHILE:
    case SP_OP_CASE:
    case SP_OP_IF:
    case SP_OP_PARTITION_ID:
    case SP_OP_REPLICA_ID:
    case SP_OP_CREATE_TOKEN:
    case SP_OP_AFTER_ALL:
        return true;
    default:
        return k >= SP_OP_SDY_ALL_GATHER || k == SP_OP_UNKNOWN;
    }
}

/* Ops costed as explicit collectives (explicit_coll): Shardy's collectives
 * and reshards, and the StableHLO collectives the model has a formula for
 * (all but collective_broadcast, which is costed like any other op). */
static bool costs_as_collective(sp_op_kind k)
{
    return sp_op_is_sdy_collective(k) ||
           (sp_op_is_collective(k) && k != SP_OP_COLLECTIVE_BROADCAST);
}

/* Ops with regions whose bodies run as part of the op (every branch is
 * counted, a loop body once). Reduction bodies and the like are scalar
 * computations already in the op's formula. */
static bool walks_regions(sp_op_kind k)
{
    return k == SP_OP_WHILE || k == SP_OP_CASE || k == SP_OP_IF ||
           k == SP_OP_SDY_MANUAL_COMPUTATION || k == SP_OP_SDY_NAMED_COMPUTATION;
}

static double walk_function(cctx *x, uint32_t fi, double mult);
static double walk_block(cctx *x, uint32_t blk, double mult, bool loop_body, bool record);
static uint32_t buffer_source(cctx *x, const sp_op *o, uint32_t r);

/* The integer a 0-d (or splat) integer constant holds, or false. */
static bool const_int(const sp_module *m, uint32_t v, int64_t *out)
{
    uint32_t d = m->values[v].def;
    if (d == SP_NONE || (m->ops[d].kind != SP_OP_CONSTANT && m->ops[d].kind != SP_OP_SDY_CONSTANT)) {
        return false;
    }
    const sp_attr *a = sp_attrs_get(m->ops[d].attrs, m->ops[d].n_attrs, "value");
    if (a == NULL || a->kind != SP_ATTR_DENSE || a->u.dense.ints == NULL || a->u.dense.n_ints != 1) {
        return false;
    }
    *out = a->u.dense.ints[0];
    return true;
}

/* How many times the body of while op w runs when it is a counted loop, as
 * jax.lax.fori_loop and scan emit it: the condition returns `compare LT
 * (or LE, GT, GE) %i, %n` of a carried value %i and a constant %n (or the
 * constant first), %i starts from a constant and the body returns
 * `add %i, %step` with a constant step of the loop's direction. -1 when
 * the loop is not of that form (its body then counts once). */
static double while_trips(const sp_module *m, const sp_op *w)
{
    if (w->n_regions != 2 || w->regions[0].n_blocks != 1 || w->regions[1].n_blocks != 1) {
        return -1;
    }
    const sp_block *cb = &m->blocks[w->regions[0].blocks[0]];
    const sp_block *bb = &m->blocks[w->regions[1].blocks[0]];
    if (cb->n_ops == 0 || bb->n_ops == 0) {
        return -1;
    }
    const sp_op *cret = &m->ops[cb->ops[cb->n_ops - 1]];
    const sp_op *bret = &m->ops[bb->ops[bb->n_ops - 1]];
    if (cret->n_operands != 1 || m->values[cret->operands[0]].def == SP_NONE) {
        return -1;
    }
    const sp_op *cmp = &m->ops[m->values[cret->operands[0]].def];
    const sp_attr *dir = sp_attrs_get(cmp->attrs, cmp->n_attrs, "comparison_direction");
    if (cmp->kind != SP_OP_COMPARE || cmp->n_operands != 2 || dir == NULL ||
        dir->kind != SP_ATTR_ENUM) {
        return -1;
    }
    /* i <op> n, with the carried value on the left (swap the direction
     * when it is on the right). */
    const char *d = dir->u.enm.value;
    uint32_t iv = cmp->operands[0], nv = cmp->operands[1];
    int64_t n, init, step;
    if (!const_int(m, nv, &n)) {
        uint32_t t = iv;
        iv = nv;
        nv = t;
        if (!const_int(m, nv, &n)) {
            return -1;
        }
        d = strcmp(d, "LT") == 0   ? "GT"
            : strcmp(d, "GT") == 0 ? "LT"
            : strcmp(d, "LE") == 0 ? "GE"
            : strcmp(d, "GE") == 0 ? "LE"
                                   : d;
    }
    const sp_value *ivv = &m->values[iv];
    if (ivv->def != SP_NONE || ivv->block != w->regions[0].blocks[0] ||
        ivv->index >= w->n_operands || ivv->index >= bret->n_operands || ivv->index >= bb->n_args ||
        !const_int(m, w->operands[ivv->index], &init)) {
        return -1;
    }
    /* the body's next %i: add(%i_body, step) */
    uint32_t next = bret->operands[ivv->index];
    if (m->values[next].def == SP_NONE) {
        return -1;
    }
    const sp_op *add = &m->ops[m->values[next].def];
    uint32_t barg = bb->first_arg + ivv->index;
    if (add->kind != SP_OP_ADD || add->n_operands != 2) {
        return -1;
    }
    uint32_t sv = add->operands[0] == barg ? add->operands[1]
                  : add->operands[1] == barg ? add->operands[0]
                                             : SP_NONE;
    if (sv == SP_NONE || !const_int(m, sv, &step) || step == 0) {
        return -1;
    }
    /* trips of for (i = init; i d n; i += step), in doubles: no overflow */
    double span;
    if (strcmp(d, "LT") == 0 || strcmp(d, "LE") == 0) {
        span = (double)n - (double)init + (strcmp(d, "LE") == 0 ? 1.0 : 0.0);
        if (step < 0) {
            return span > 0 ? -1 : 0; /* never ends, or never runs */
        }
    } else if (strcmp(d, "GT") == 0 || strcmp(d, "GE") == 0) {
        span = (double)init - (double)n + (strcmp(d, "GE") == 0 ? 1.0 : 0.0);
        if (step > 0) {
            return span > 0 ? -1 : 0;
        }
        step = step == INT64_MIN ? INT64_MAX : -step;
    } else {
        return -1;
    }
    return span <= 0 ? 0 : ceil(span / (double)step);
}

static uint32_t find_func(const cctx *x, const char *name)
{
    for (uint32_t i = 0; i < x->n_funcs; i++) {
        if (x->fnames[i] != NULL && strcmp(x->fnames[i], name) == 0) {
            return i;
        }
    }
    return SP_NONE;
}

static const char *callee_of(const sp_op *o)
{
    const sp_attr *a = sp_attrs_get(o->attrs, o->n_attrs, "callee");
    if (a == NULL) {
        return NULL;
    }
    return a->kind == SP_ATTR_SYMBOL ? a->u.sym : a->kind == SP_ATTR_STRING ? a->u.str.s : NULL;
}

/* Costs one op (and the ops of regions it runs); returns the extra peak
 * activation bytes it needs while it runs (a callee's). */
static double cost_op(cctx *x, uint32_t id, double mult)
{
    const sp_op *o = &x->m->ops[id];
    sp_op_kind k = (sp_op_kind)o->kind;
    sp_cost_summary *s = &x->c->s;
    double inner = 0;
    uint32_t inner_op = SP_NONE;
    if (++s->n_ops > x->max_instances) {
        if (x->st == CM_OK) {
            x->st = cm_error_set(x->err, CM_EINVAL, NULL,
                                 "the module's calls expand to more than %llu op instances (a "
                                 "function reached through many nested call sites): too many to "
                                 "cost in one request",
                                 (unsigned long long)x->max_instances);
        }
        return 0;
    }
    if (costs_as_collective(k)) {
        explicit_coll(x, id, mult);
    } else if (x->implied) {
        implied_op(x, id, mult);
    }
    if (!is_free_op(k)) {
        int cls;
        double f = op_flops(x, id, &cls);
        double traffic = 0;
        if (k == SP_OP_DYNAMIC_UPDATE_SLICE && o->n_operands >= 2 && o->n_results == 1 &&
            buffer_source(x, o, 0) != SP_NONE) {
            traffic = 2 * val_bytes(x, o->operands[1]); /* in place: reads and writes the update */
        } else if ((k == SP_OP_RESHAPE || k == SP_OP_DYNAMIC_SLICE) && o->n_results == 1 &&
                   buffer_source(x, o, 0) != SP_NONE) {
            traffic = 0; /* a view: its users read the slice */
        } else {
            for (uint32_t i = 0; i < o->n_operands; i++) {
                traffic += val_bytes(x, o->operands[i]);
            }
            for (uint32_t r = 0; r < o->n_results; r++) {
                traffic += val_bytes(x, o->first_result + r);
            }
        }
        double *bucket = cls == 0   ? &s->flops_dot
                         : cls == 1 ? &s->flops_elementwise
                         : cls == 2 ? &s->flops_reduce
                                    : &s->flops_other;
        *bucket += f * mult;
        s->flops += f * mult;
        s->mem_traffic_bytes += traffic * mult;
        sp_elem e = o->n_operands > 0 ? sp_value_type(x->m, o->operands[0])->elem
                                      : sp_value_type(x->m, o->first_result)->elem;
        double peak = sp_profile_peak(x->p, dtype_of(e), cls == 0), dm, dk, dn;
        if (cls == 0 && dot_call(x, id, &dm, &dk, &dn)) {
            peak = sp_profile_dot_rate(x->p, dtype_of(e), dm, dk, dn);
        }
        double tc = peak > 0 ? f / peak : 0;
        double tm = x->p->mem_bandwidth > 0 ? traffic / x->p->mem_bandwidth : 0;
        if (is_transcendental(k) && x->p->transcendentals > 0) {
            double tt = f / x->p->transcendentals; /* f: the result elements */
            tc = tt > tc ? tt : tc;
        }
        s->compute_s += (tc > tm ? tc : tm) * mult;
        if (x->c->ops != NULL) {
            x->c->ops[id].flops += f * mult;
            x->c->ops[id].time_s += (tc > tm ? tc : tm) * mult;
        }
    }
    if (k == SP_OP_FUNC_CALL) {
        const char *cal = callee_of(o);
        uint32_t fi = cal != NULL ? find_func(x, cal) : SP_NONE;
        if (fi != SP_NONE && x->depth < MAX_CALL_DEPTH) {
            inner = walk_function(x, fi, mult);
            inner_op = x->peak_op;
        }
    }
    if (walks_regions(k)) {
        /* A counted loop's condition runs trips + 1 times, its body trips
         * times; other loops count each once. A while body's carried
         * arguments hold buffers of their own (the loop's state); the other
         * regions' arguments are views of the op's operands. */
        double trips = k == SP_OP_WHILE ? while_trips(x->m, o) : -1;
        for (uint32_t r = 0; r < o->n_regions; r++) {
            double rm = trips < 0 ? mult : mult * (r == 0 ? trips + 1 : trips);
            for (uint32_t b = 0; b < o->regions[r].n_blocks && x->st == CM_OK; b++) {
                double in2 = walk_block(x, o->regions[r].blocks[b], rm,
                                        k == SP_OP_WHILE && r == 1, false);
                if (in2 > inner) {
                    inner = in2;
                    inner_op = x->peak_op;
                }
            }
        }
    }
    x->peak_op = inner_op;
    return inner;
}

/* ---- liveness ---------------------------------------------------------------------------- */

/* Ops whose result is the operand's buffer under another sharding annotation. */
static bool is_alias_op(sp_op_kind k)
{
    return k == SP_OP_SDY_SHARDING_CONSTRAINT || k == SP_OP_SDY_DATA_FLOW_EDGE ||
           k == SP_OP_SDY_PROPAGATION_BARRIER || k == SP_OP_OPTIMIZATION_BARRIER;
}

/* True when the body of while op w returns its carried argument j unchanged
 * (a loop invariant: the stacked weights of a scan). */
static bool loop_passes(const sp_module *m, const sp_op *w, uint32_t j)
{
    if (w->kind != SP_OP_WHILE || w->n_regions != 2 || w->regions[1].n_blocks != 1) {
        return false;
    }
    const sp_block *bb = &m->blocks[w->regions[1].blocks[0]];
    if (bb->n_ops == 0 || j >= bb->n_args) {
        return false;
    }
    const sp_op *ret = &m->ops[bb->ops[bb->n_ops - 1]];
    return j < ret->n_operands && ret->operands[j] == bb->first_arg + j;
}

/* The operand whose buffer result r of op o shares, or SP_NONE when the
 * result has a buffer of its own. Annotations share (a constraint only while
 * the local size is unchanged: one that reshards makes a new buffer); a
 * reshape of the same local size is a bitcast; a dynamic_slice is read in
 * place by its users (XLA fuses it into them), a dynamic_update_slice writes
 * in place; a while's pass-through carried value is its operand. */
static uint32_t buffer_source(cctx *x, const sp_op *o, uint32_t r)
{
    sp_op_kind k = (sp_op_kind)o->kind;
    uint32_t res = o->first_result + r;
    if (is_alias_op(k) && r < o->n_operands) {
        uint32_t v = o->operands[r];
        if (k == SP_OP_SDY_SHARDING_CONSTRAINT && val_bytes(x, res) != val_bytes(x, v)) {
            return SP_NONE;
        }
        return v;
    }
    if ((k == SP_OP_RESHAPE || k == SP_OP_DYNAMIC_SLICE || k == SP_OP_DYNAMIC_UPDATE_SLICE) &&
        r == 0 && o->n_operands >= 1 && o->n_results == 1) {
        uint32_t v = o->operands[0];
        if (k != SP_OP_DYNAMIC_SLICE && val_bytes(x, res) != val_bytes(x, v)) {
            return SP_NONE;
        }
        return v;
    }
    if (k == SP_OP_WHILE && r < o->n_operands && loop_passes(x->m, o, r)) {
        return o->operands[r];
    }
    return SP_NONE;
}

/* True when value v is an argument of block blk or a result of one of its ops. */
static bool defined_in(const sp_module *m, uint32_t v, uint32_t blk)
{
    uint32_t d = m->values[v].def;
    return d == SP_NONE ? m->values[v].block == blk : m->ops[d].parent_block == blk;
}

/* Marks in last_use the uses, by op o at index top of block blk (and by the
 * ops of its regions), of the buffers of blk's own values. */
static void mark_uses(cctx *x, const sp_op *o, uint32_t top, uint32_t blk)
{
    for (uint32_t i = 0; i < o->n_operands; i++) {
        uint32_t v = x->alias[o->operands[i]];
        if (defined_in(x->m, v, blk)) {
            x->last_use[v] = top;
        }
    }
    for (uint32_t r = 0; r < o->n_regions; r++) {
        for (uint32_t b = 0; b < o->regions[r].n_blocks; b++) {
            const sp_block *bl = &x->m->blocks[o->regions[r].blocks[b]];
            for (uint32_t i = 0; i < bl->n_ops; i++) {
                mark_uses(x, &x->m->ops[bl->ops[i]], top, blk);
            }
        }
    }
}

/* The output index argument i of function op f is donated to
 * (`tf.aliasing_output = K`), -2 for `jax.buffer_donor = true` (matched to
 * an output of the same type), -1 when not donated. */
static int64_t donated_to(const sp_module *m, uint32_t f, uint32_t i)
{
    const sp_attr *arr = sp_op_attr(m, f, "arg_attrs");
    if (arr == NULL || arr->kind != SP_ATTR_ARRAY || i >= arr->u.arr.n ||
        arr->u.arr.items[i] == NULL || arr->u.arr.items[i]->kind != SP_ATTR_DICT) {
        return -1;
    }
    const sp_attr *d = arr->u.arr.items[i];
    const sp_attr *a = sp_attrs_get(d->u.dict.items, d->u.dict.n, "tf.aliasing_output");
    if (a != NULL && a->kind == SP_ATTR_INT && a->u.i.v >= 0) {
        return a->u.i.v;
    }
    a = sp_attrs_get(d->u.dict.items, d->u.dict.n, "jax.buffer_donor");
    return a != NULL && (a->kind == SP_ATTR_UNIT || (a->kind == SP_ATTR_BOOL && a->u.b)) ? -2 : -1;
}

/* Index in its block at which the buffer of owned value v dies. */
static uint32_t death_of(const cctx *x, uint32_t v)
{
    uint32_t lu = x->last_use[v];
    return lu == SP_NONE || lu < x->pos[v] ? x->pos[v] : lu;
}

/* A donated argument's buffer takes the output it is donated to when the
 * argument is last read no later than the op that makes the output (XLA
 * writes it in place; otherwise it would copy and the output keeps a buffer
 * of its own). */
static void apply_donation(cctx *x, const sp_block *bl, uint32_t blk)
{
    sp_module *m = x->m;
    uint32_t f = bl->parent_op;
    if (f == SP_NONE || m->ops[f].kind != SP_OP_FUNC_FUNC || bl->n_ops == 0) {
        return;
    }
    const sp_op *ret = &m->ops[bl->ops[bl->n_ops - 1]];
    uint32_t taken_n = ret->n_operands;
    bool *taken = cm_calloc(taken_n + 1u, sizeof(bool));
    if (taken == NULL) {
        fail_oom(x);
        return;
    }
    for (uint32_t a = 0; a < bl->n_args; a++) {
        int64_t k = donated_to(m, f, a);
        uint32_t arg = bl->first_arg + a;
        if (k == -2) {
            for (uint32_t j = 0; j < taken_n; j++) {
                if (!taken[j] && sp_value_type(m, ret->operands[j]) == sp_value_type(m, arg)) {
                    k = j;
                    break;
                }
            }
        }
        if (k < 0 || (uint64_t)k >= taken_n || taken[k]) {
            continue;
        }
        taken[k] = true;
        uint32_t v = x->alias[ret->operands[k]];
        if (!x->owned[v] || !defined_in(m, v, blk) || m->values[v].def == SP_NONE ||
            val_bytes(x, v) > val_bytes(x, arg)) {
            continue;
        }
        uint32_t lu = x->last_use[arg];
        if (lu == SP_NONE || lu <= x->pos[v]) {
            x->owned[v] = 0;
        }
    }
    cm_free(taken);
}

/* Keeps buffer (v, kind, bytes) in c's list of the largest at the peak. */
static void peak_buffer_add(sp_cost *c, uint32_t v, sp_cost_buf_kind kind, double bytes)
{
    if (bytes <= 0) {
        return;
    }
    uint32_t n = c->n_bufs;
    if (n == SP_COST_MAX_PEAK_BUFFERS && c->bufs[n - 1].bytes >= bytes) {
        return;
    }
    uint32_t i = n < SP_COST_MAX_PEAK_BUFFERS ? n : n - 1;
    while (i > 0 && c->bufs[i - 1].bytes < bytes) {
        c->bufs[i] = c->bufs[i - 1];
        i--;
    }
    c->bufs[i].value = v;
    c->bufs[i].kind = kind;
    c->bufs[i].bytes = bytes;
    c->n_bufs = n < SP_COST_MAX_PEAK_BUFFERS ? n + 1 : n;
}

/* The buffers live at index at of root block bl: its arguments and the
 * owned results still needed there. */
static void collect_peak_buffers(cctx *x, const sp_block *bl, uint32_t at)
{
    sp_cost *c = x->c;
    c->n_bufs = 0;
    for (uint32_t a = 0; a < bl->n_args; a++) {
        uint32_t v = bl->first_arg + a;
        peak_buffer_add(c, v, x->role[v] ? SP_COST_BUF_PARAMETER : SP_COST_BUF_INPUT,
                        val_bytes(x, v));
    }
    for (uint32_t i = 0; i <= at && i < bl->n_ops; i++) {
        const sp_op *o = &x->m->ops[bl->ops[i]];
        for (uint32_t r = 0; r < o->n_results; r++) {
            uint32_t v = o->first_result + r;
            if (x->owned[v] && death_of(x, v) >= at && !(o->kind == SP_OP_WHILE && i == at)) {
                peak_buffer_add(c, v, SP_COST_BUF_ACTIVATION, val_bytes(x, v));
            }
        }
    }
}

static void mem_point_add(cctx *x, uint32_t op, double act, double temp, uint32_t inner)
{
    sp_cost *c = x->c;
    if (!grow((void **)&c->mem, &c->cap_mem, c->n_mem + 1, sizeof(sp_cost_mem_point))) {
        fail_oom(x);
        return;
    }
    c->mem[c->n_mem].op = op;
    c->mem[c->n_mem].activation_bytes = act;
    c->mem[c->n_mem].temporary_bytes = temp;
    c->mem[c->n_mem].inner_op = inner;
    c->n_mem++;
}

/* Walks block blk once in program order: costs its ops times mult and
 * returns its peak of live buffer bytes (results of its ops, and for a loop
 * body its carried arguments; a function's arguments are counted apart).
 * With record (a root function's block) donated arguments are honoured, a
 * new overall peak collects the buffers live there and (opts.timeline)
 * every op adds a timeline point. */
static double walk_block(cctx *x, uint32_t blk, double mult, bool loop_body, bool record)
{
    sp_module *m = x->m;
    const sp_block *bl = &m->blocks[blk];
    const sp_op *parent = bl->parent_op != SP_NONE ? &m->ops[bl->parent_op] : NULL;
    bool in_func = parent == NULL || parent->kind == SP_OP_FUNC_FUNC;
    uint32_t n = bl->n_ops;
    x->depth++;
    for (uint32_t a = 0; a < bl->n_args; a++) {
        uint32_t v = bl->first_arg + a;
        x->last_use[v] = SP_NONE;
        x->pos[v] = 0;
        x->owned[v] = 0;
        x->alias[v] = v;
        if (!in_func && a < parent->n_operands) {
            if (loop_body && !loop_passes(m, parent, a)) {
                x->owned[v] = 1; /* the loop's state: a buffer of its own */
            } else {
                x->alias[v] = x->alias[parent->operands[a]];
            }
        }
    }
    uint32_t n_owned = bl->n_args;
    for (uint32_t i = 0; i < n; i++) {
        const sp_op *o = &m->ops[bl->ops[i]];
        for (uint32_t r = 0; r < o->n_results; r++) {
            uint32_t v = o->first_result + r;
            uint32_t src = buffer_source(x, o, r);
            x->alias[v] = src != SP_NONE ? x->alias[src] : v;
            x->owned[v] = src == SP_NONE;
            x->last_use[v] = SP_NONE;
            x->pos[v] = i;
            n_owned += x->owned[v];
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        mark_uses(x, &m->ops[bl->ops[i]], i, blk);
    }
    if (record) {
        apply_donation(x, bl, blk);
    }
    /* deaths per index, as counts then a CSR list */
    uint32_t *head = cm_calloc((size_t)n + 2, sizeof(uint32_t));
    uint32_t *dead = cm_alloc(sizeof(uint32_t) * ((size_t)n_owned + 1));
    if (head == NULL || dead == NULL || x->st != CM_OK) {
        cm_free(head);
        cm_free(dead);
        x->depth--;
        fail_oom(x);
        return 0;
    }
    double live = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t a = 0; a < bl->n_args; a++) {
            uint32_t v = bl->first_arg + a;
            if (x->owned[v] && x->last_use[v] != SP_NONE) {
                if (pass == 0) {
                    head[death_of(x, v) + 1]++;
                    live += val_bytes(x, v);
                } else {
                    dead[head[death_of(x, v)]++] = v;
                }
            }
        }
        for (uint32_t i = 0; i < n; i++) {
            const sp_op *o = &m->ops[bl->ops[i]];
            for (uint32_t r = 0; r < o->n_results; r++) {
                uint32_t v = o->first_result + r;
                if (!x->owned[v]) {
                    continue;
                }
                if (pass == 0) {
                    head[death_of(x, v) + 1]++;
                } else {
                    dead[head[death_of(x, v)]++] = v;
                }
            }
        }
        if (pass == 0) {
            for (uint32_t i = 0; i < n; i++) {
                head[i + 1] += head[i];
            }
        }
    }
    /* head[i] is now the end of index i's deaths; its start is head[i-1] (0 for i = 0) */
    double peak = live;
    uint32_t start = 0, best = SP_NONE, best_inner = SP_NONE;
    for (uint32_t i = 0; i < n && x->st == CM_OK; i++) {
        uint32_t id = bl->ops[i];
        const sp_op *o = &m->ops[id];
        double res = 0;
        for (uint32_t r = 0; r < o->n_results; r++) {
            uint32_t v = o->first_result + r;
            res += x->owned[v] ? val_bytes(x, v) : 0;
        }
        double inner = cost_op(x, id, mult);
        double act = live + res, temp = inner;
        if (o->kind == SP_OP_WHILE) {
            /* The carried buffers that die here are the loop's state: the
             * body holds them (as its arguments) while it runs, and the
             * results take them when it ends. */
            double carried = 0;
            for (uint32_t j = 0; j < o->n_operands; j++) {
                uint32_t v = x->alias[o->operands[j]];
                bool first = true;
                for (uint32_t k = 0; k < j && first; k++) {
                    first = x->alias[o->operands[k]] != v;
                }
                if (first && !loop_passes(m, o, j) && x->owned[v] && defined_in(m, v, blk) &&
                    death_of(x, v) == i) {
                    carried += val_bytes(x, v);
                }
            }
            double during = live - carried + inner, after = live - carried + res;
            act = during >= after ? live - carried : after;
            temp = during >= after ? inner : 0;
        }
        if (act + temp > peak || best == SP_NONE) {
            peak = act + temp > peak ? act + temp : peak;
            best = i;
            best_inner = temp > 0 && x->peak_op != SP_NONE ? x->peak_op : id;
        }
        if (record && x->o->timeline) {
            mem_point_add(x, id, act, temp, temp > 0 ? x->peak_op : SP_NONE);
        }
        live += res;
        for (uint32_t k = start; k < head[i]; k++) {
            live -= val_bytes(x, dead[k]);
        }
        start = head[i];
    }
    if (record && x->st == CM_OK && best != SP_NONE && peak > x->c->best_peak) {
        x->c->best_peak = peak;
        x->c->s.peak_op = bl->ops[best];
        x->c->s.peak_inner_op = best_inner != bl->ops[best] ? best_inner : SP_NONE;
        collect_peak_buffers(x, bl, best);
    }
    cm_free(head);
    cm_free(dead);
    x->depth--;
    x->peak_op = best_inner;
    return peak;
}

/* Walks function fi once: adds its costs times mult and returns its peak of
 * live activation bytes (results of its ops; arguments are counted apart). */
static double walk_function(cctx *x, uint32_t fi, double mult)
{
    const sp_op *f = &x->m->ops[x->funcs[fi]];
    if (f->n_regions < 1 || f->regions[0].n_blocks < 1) {
        return 0;
    }
    return walk_block(x, f->regions[0].blocks[0], mult, false, x->depth == 0);
}

/* ---- parameters and inputs ------------------------------------------------------------------ */

static bool has_ci(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (; *s != '\0'; s++) {
        size_t i = 0;
        while (i < n && s[i] != '\0' &&
               (s[i] | 0x20) == (w[i] | 0x20)) {
            i++;
        }
        if (i == n) {
            return true;
        }
    }
    return false;
}

/* 1: parameter, 0: input, -1: the name does not tell. */
static int role_of_name(const char *name)
{
    if (name == NULL || name[0] == '\0') {
        return -1;
    }
    static const char *const pw[] = {"param", "kernel", "weight", "bias", "scale", "embedding",
                                     "opt_state", "moment"};
    for (size_t i = 0; i < sizeof pw / sizeof pw[0]; i++) {
        if (has_ci(name, pw[i])) {
            return 1;
        }
    }
    const char *last = name;
    for (const char *p = name; *p != '\0'; p++) {
        if (*p == '.' || *p == '/' || *p == '[' || *p == '\'') {
            last = p + 1;
        }
    }
    if (last[0] == 'W' && (last[1] == '\0' || (last[1] >= '0' && last[1] <= '9') ||
                           (last[1] >= 'a' && last[1] <= 'z' && last[2] == '\0'))) {
        return 1;
    }
    static const char *const iw[] = {"input", "batch", "token", "label", "image", "target"};
    for (size_t i = 0; i < sizeof iw / sizeof iw[0]; i++) {
        if (has_ci(name, iw[i])) {
            return 0;
        }
    }
    return strcmp(last, "x") == 0 || strcmp(last, "y") == 0 ? 0 : -1;
}

static bool is_view_op(sp_op_kind k)
{
    return k == SP_OP_CONVERT || k == SP_OP_RESHAPE || k == SP_OP_TRANSPOSE ||
           k == SP_OP_SDY_SHARDING_CONSTRAINT || k == SP_OP_BROADCAST_IN_DIM ||
           k == SP_OP_DYNAMIC_SLICE;
}

/* Marks in x->weight the values of a block that feed, directly or through
 * view ops, a non-first operand of a dot or convolution: how a parameter is
 * recognised when the argument has no name. One backward pass: users come
 * after their definitions. */
static void mark_weights(cctx *x, const sp_block *bl)
{
    const sp_module *m = x->m;
    for (uint32_t i = bl->n_ops; i-- > 0;) {
        const sp_op *o = &m->ops[bl->ops[i]];
        sp_op_kind k = (sp_op_kind)o->kind;
        if (k == SP_OP_DOT_GENERAL || k == SP_OP_DOT || k == SP_OP_CONVOLUTION) {
            for (uint32_t j = 1; j < o->n_operands; j++) {
                x->weight[o->operands[j]] = 1;
            }
        } else if (is_view_op(k) && o->n_results == 1 && o->n_operands >= 1 &&
                   x->weight[o->first_result]) {
            x->weight[o->operands[0]] = 1;
        } else if (k == SP_OP_WHILE && o->n_regions == 2 && o->regions[1].n_blocks == 1) {
            /* a scan: weights sliced from carried stacks inside the body */
            const sp_block *bb = &m->blocks[o->regions[1].blocks[0]];
            mark_weights(x, bb);
            for (uint32_t j = 0; j < o->n_operands && j < bb->n_args; j++) {
                if (x->weight[bb->first_arg + j]) {
                    x->weight[o->operands[j]] = 1;
                }
            }
        }
    }
}

static void count_args(cctx *x, uint32_t fi)
{
    sp_module *m = x->m;
    uint32_t fid = x->funcs[fi];
    const sp_op *f = &m->ops[fid];
    const sp_block *bl = &m->blocks[f->regions[0].blocks[0]];
    mark_weights(x, bl);
    for (uint32_t a = 0; a < bl->n_args; a++) {
        uint32_t v = bl->first_arg + a;
        const char *name = v < x->o->n_value_names ? x->o->value_names[v] : NULL;
        char loc[128] = "";
        if (name == NULL && bl->arg_locs != NULL && bl->arg_locs[a] != NULL) {
            const char *l = bl->arg_locs[a];
            size_t n = strlen(l);
            if (n >= 2 && l[0] == '"') {
                const char *q = strchr(l + 1, '"');
                n = q != NULL ? (size_t)(q - l - 1) : n - 1;
                snprintf(loc, sizeof loc, "%.*s", (int)n, l + 1);
                name = loc;
            }
        }
        int role = role_of_name(name);
        if (role < 0) {
            const sp_type *t = sp_value_type(m, v);
            role = (t->kind == SP_TYPE_TENSOR && t->rank <= 1) || x->weight[v] ? 1 : 0;
        }
        double b = val_bytes(x, v);
        x->role[v] = role == 1;
        if (role == 1) {
            x->c->s.param_bytes += b;
        } else {
            x->c->s.input_bytes += b;
        }
    }
    const sp_type *ft = sp_func_type(m, fid);
    for (uint32_t i = 0; ft != NULL && i < ft->n_results; i++) {
        const sp_type *t = &m->types[ft->results[i]];
        if (t->kind == SP_TYPE_TENSOR) {
            x->c->s.output_bytes += local_elems(x, t, sp_func_result_sharding(m, fid, i)) *
                                    (double)sp_elem_bytes(t->elem);
        }
    }
}

/* ---- entry point ------------------------------------------------------------------------------- */

cm_status sp_cost_compute(sp_module *m, const sp_cost_opts *o, sp_cost **out, cm_error *err)
{
    *out = NULL;
    sp_profile defp;
    if (o->profile == NULL) {
        sp_profile_default(&defp);
    }
    cctx x;
    memset(&x, 0, sizeof x);
    x.m = m;
    x.o = o;
    x.p = o->profile != NULL ? o->profile : &defp;
    x.err = err;
    uint64_t max_inst = MAX_OP_INSTANCES + 2u * (uint64_t)m->n_ops;
    x.max_instances = max_inst < UINT32_MAX ? (uint32_t)max_inst : UINT32_MAX;
    x.c = cm_calloc(1, sizeof(sp_cost));
    if (x.c == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the cost model");
    }
    sp_cost_summary *s = &x.c->s;
    bool part = sp_module_is_partitioned(m);
    x.implied = o->mode == SP_COST_IMPLIED || (o->mode == SP_COST_AUTO && !part);
    s->partitioned = !x.implied;
    snprintf(s->profile, sizeof s->profile, "%s", x.p->name);
    s->profile_calibrated = x.p->calibrated;
    const sp_block *body = &m->blocks[m->body];
    x.funcs = cm_alloc(sizeof(uint32_t) * (body->n_ops + 1u));
    x.fnames = cm_alloc(sizeof(char *) * (body->n_ops + 1u));
    x.called = cm_calloc(body->n_ops + 1u, sizeof(bool));
    x.last_use = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    x.alias = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    x.pos = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    x.owned = cm_calloc(m->n_values + 1u, 1);
    x.role = cm_calloc(m->n_values + 1u, 1);
    x.c->best_peak = -1;
    x.c->value_names = o->value_names;
    x.c->n_value_names = o->n_value_names;
    s->peak_op = SP_NONE;
    s->peak_inner_op = SP_NONE;
    x.shard = cm_alloc(sizeof(sp_sharding *) * (m->n_values + 1u));
    x.elems = cm_alloc(sizeof(double) * (m->n_values + 1u));
    x.weight = cm_calloc(m->n_values + 1u, 1);
    if (o->per_op) {
        x.c->ops = cm_calloc(m->n_ops + 1u, sizeof(sp_cost_op));
        x.c->n_ops = m->n_ops;
        if (x.c->ops == NULL) {
            fail_oom(&x);
            goto out;
        }
    }
    if (x.shard == NULL || x.elems == NULL || x.weight == NULL || x.pos == NULL ||
        x.owned == NULL || x.role == NULL) {
        fail_oom(&x);
        goto out;
    }
    if (x.funcs == NULL || x.fnames == NULL || x.called == NULL || x.last_use == NULL ||
        x.alias == NULL) {
        fail_oom(&x);
        goto out;
    }
    for (uint32_t v = 0; v < m->n_values; v++) {
        x.alias[v] = v;
        x.shard[v] = &unset_sharding;
        x.elems[v] = -1;
    }
    s->devices = 1;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *op = &m->ops[body->ops[i]];
        if (op->kind == SP_OP_SDY_MESH) {
            const sp_attr *ma = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
            int64_t d = ma != NULL && ma->kind == SP_ATTR_MESH ? sp_mesh_size(ma->u.mesh) : 1;
            s->devices = d > s->devices ? d : s->devices;
        }
        if (op->kind != SP_OP_FUNC_FUNC || op->n_regions != 1 || op->regions[0].n_blocks == 0) {
            continue;
        }
        const sp_attr *nm = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        x.fnames[x.n_funcs] = nm != NULL && nm->kind == SP_ATTR_STRING ? nm->u.str.s : NULL;
        x.funcs[x.n_funcs++] = body->ops[i];
    }
    /* functions called from another are costed at their call sites */
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind == SP_OP_FUNC_CALL) {
            const char *cal = callee_of(&m->ops[i]);
            uint32_t fi = cal != NULL ? find_func(&x, cal) : SP_NONE;
            if (fi != SP_NONE) {
                x.called[fi] = true;
            }
        }
    }
    for (uint32_t fi = 0; fi < x.n_funcs && x.st == CM_OK; fi++) {
        if (x.called[fi]) {
            continue;
        }
        count_args(&x, fi);
        double peak = walk_function(&x, fi, 1.0);
        s->peak_activation_bytes = peak > s->peak_activation_bytes ? peak : s->peak_activation_bytes;
    }
    if (x.st != CM_OK) {
        goto out;
    }
    s->peak_bytes = s->param_bytes + s->input_bytes + s->peak_activation_bytes;
    s->overlap = o->overlap >= 0 ? o->overlap : x.p->overlap;
    s->overlap = s->overlap < 0 ? 0 : s->overlap > 1 ? 1 : s->overlap;
    s->hidden_s = s->overlap * s->comm_s < s->compute_s ? s->overlap * s->comm_s : s->compute_s;
    s->step_s = s->compute_s + s->comm_s - s->hidden_s;
    s->capacity_bytes = x.p->mem_bytes;
    if (x.p->mem_shared && s->devices > 0) {
        s->capacity_bytes /= (double)s->devices;
    }
    s->fits = s->capacity_bytes <= 0 || s->peak_bytes <= s->capacity_bytes;
out:
    cm_free(x.funcs);
    cm_free(x.fnames);
    cm_free(x.called);
    cm_free(x.last_use);
    cm_free(x.alias);
    cm_free(x.pos);
    cm_free(x.owned);
    cm_free(x.role);
    cm_free(x.shard);
    cm_free(x.elems);
    cm_free(x.weight);
    if (x.st != CM_OK) {
        sp_cost_destroy(x.c);
        return x.st;
    }
    *out = x.c;
    return CM_OK;
}

void sp_cost_destroy(sp_cost *c)
{
    if (c == NULL) {
        return;
    }
    cm_free(c->colls);
    cm_free(c->axes);
    cm_free(c->ops);
    cm_free(c->mem);
    cm_free(c);
}

sp_cost_op sp_cost_op_at(const sp_cost *c, uint32_t op)
{
    sp_cost_op z = {0, 0};
    return c->ops != NULL && op < c->n_ops ? c->ops[op] : z;
}

uint32_t sp_cost_n_mem(const sp_cost *c)
{
    return c->n_mem;
}

const sp_cost_mem_point *sp_cost_mem_at(const sp_cost *c, uint32_t i)
{
    return i < c->n_mem ? &c->mem[i] : NULL;
}

uint32_t sp_cost_n_peak_buffers(const sp_cost *c)
{
    return c->n_bufs;
}

const sp_cost_buffer *sp_cost_peak_buffer_at(const sp_cost *c, uint32_t i)
{
    return i < c->n_bufs ? &c->bufs[i] : NULL;
}

const char *sp_cost_buf_kind_name(sp_cost_buf_kind k)
{
    return k == SP_COST_BUF_PARAMETER ? "parameter" : k == SP_COST_BUF_INPUT ? "input" : "activation";
}

const sp_cost_summary *sp_cost_get_summary(const sp_cost *c)
{
    return &c->s;
}

uint32_t sp_cost_n_colls(const sp_cost *c)
{
    return c->n_colls;
}

const sp_cost_coll *sp_cost_coll_at(const sp_cost *c, uint32_t i)
{
    return i < c->n_colls ? &c->colls[i] : NULL;
}

uint32_t sp_cost_n_axes(const sp_cost *c)
{
    return c->n_axes;
}

const sp_cost_axis *sp_cost_axis_at(const sp_cost *c, uint32_t i)
{
    return i < c->n_axes ? &c->axes[i] : NULL;
}

/* ---- output ------------------------------------------------------------------------------------ */

static void human_bytes(char *buf, size_t len, double v)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (fabs(v) >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0 || v == floor(v)) {
        snprintf(buf, len, "%.0f %s", v, u[i]);
    } else {
        snprintf(buf, len, "%.1f %s", v, u[i]);
    }
}

static void human_time(char *buf, size_t len, double s)
{
    if (s == 0) {
        snprintf(buf, len, "0 s");
    } else if (s < 1e-3) {
        snprintf(buf, len, "%.1f us", s * 1e6);
    } else if (s < 1) {
        snprintf(buf, len, "%.2f ms", s * 1e3);
    } else {
        snprintf(buf, len, "%.2f s", s);
    }
}

static void human_flops(char *buf, size_t len, double f)
{
    if (f >= 1e12) {
        snprintf(buf, len, "%.2f TFLOP", f / 1e12);
    } else if (f >= 1e9) {
        snprintf(buf, len, "%.2f GFLOP", f / 1e9);
    } else if (f >= 1e6) {
        snprintf(buf, len, "%.2f MFLOP", f / 1e6);
    } else {
        snprintf(buf, len, "%.0f FLOP", f);
    }
}

void sp_cost_oom_message(const sp_cost *c, char *buf, size_t len)
{
    const sp_cost_summary *s = &c->s;
    if (len > 0) {
        buf[0] = '\0';
    }
    if (s->fits || len == 0) {
        return;
    }
    char a[32], b[32];
    human_bytes(a, sizeof a, s->peak_bytes);
    human_bytes(b, sizeof b, s->capacity_bytes);
    snprintf(buf, len, "OOM predicted on every device: %s > %s", a, b);
}

static const char *mode_note(const sp_cost_summary *s)
{
    return s->partitioned ? "communication from the partitioned program's collectives"
                          : "module not partitioned: communication estimated from the "
                            "collectives each op's shardings imply";
}

/* The name of value v: the graph document's (opts.value_names), else its
 * location's. */
static const char *name_of(const sp_cost *c, const sp_module *m, uint32_t v)
{
    const char *n = v < c->n_value_names ? c->value_names[v] : NULL;
    return n != NULL ? n : sp_value_name(m, v);
}

/* "op", "name", "source" (and "line") of op id: the name its first result
 * has (c's value names only when c is given: they must still be valid),
 * where its location points (`model.py:12`). */
static void put_op_where(const sp_cost *c, cm_buf *b, const sp_module *m, uint32_t id,
                         bool with_lines)
{
    const sp_op *o = &m->ops[id];
    cm_json_put_kv_str(b, "op", o->name);
    const char *nm = NULL;
    if (o->n_results > 0) {
        nm = c != NULL ? name_of(c, m, o->first_result) : sp_value_name(m, o->first_result);
    }
    /* the members after "op" follow a value: their ',' is always due */
    cm_buf_puts(b, ",\"name\":");
    cm_json_put_cstr(b, nm);
    char src[256];
    cm_buf_puts(b, ",\"source\":");
    cm_json_put_cstr(b, sp_op_source(m, id, src, sizeof src) ? src : NULL);
    if (with_lines && o->line > 0) {
        cm_buf_puts(b, ",\"line\":");
        cm_buf_put_i64(b, o->line);
    }
}

/* ,"key":v as cm_json_put_kv_num(b, key, v, 6) writes it after a value;
 * member is the text `,"key":`. */
static void put_num_after(cm_buf *b, const char *member, double v)
{
    cm_buf_puts(b, member);
    cm_json_put_num(b, v, 6);
}

#define JSON_MAX_COLLS 100000u

static void write_json(const sp_cost *c, const sp_module *m, cm_buf *b, bool with_lines)
{
    const sp_cost_summary *s = &c->s;
    char oom[128];
    sp_cost_oom_message(c, oom, sizeof oom);
    cm_buf_puts(b, "{\"mode\":");
    cm_json_put_cstr(b, s->partitioned ? "explicit" : "implied");
    cm_json_put_kv_str(b, "note", mode_note(s));
    cm_json_put_kv_str(b, "profile", s->profile);
    cm_buf_printf(b, ",\"devices\":%lld,\"ops\":%u,\n \"memory\":{\"parameter_bytes\":",
                  (long long)s->devices, s->n_ops);
    cm_json_put_num(b, s->param_bytes, 6);
    cm_json_put_kv_num(b, "input_bytes", s->input_bytes, 6);
    cm_json_put_kv_num(b, "output_bytes", s->output_bytes, 6);
    cm_json_put_kv_num(b, "peak_activation_bytes", s->peak_activation_bytes, 6);
    cm_json_put_kv_num(b, "peak_bytes", s->peak_bytes, 6);
    cm_json_put_kv_num(b, "capacity_bytes", s->capacity_bytes, 6);
    cm_buf_puts(b, s->fits ? ",\"fits\":true" : ",\"fits\":false");
    cm_json_put_kv_str(b, "message", oom);
    if (s->peak_op != SP_NONE) {
        /* names from locations only: the caller's value names may be gone */
        cm_buf_puts(b, ",\"peak_at\":{");
        put_op_where(NULL, b, m, s->peak_op, with_lines);
        if (s->peak_inner_op != SP_NONE) {
            cm_buf_puts(b, ",\"inner\":{");
            put_op_where(NULL, b, m, s->peak_inner_op, with_lines);
            cm_buf_putc(b, '}');
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "},\n \"flops\":{\"total\":");
    cm_json_put_num(b, s->flops, 6);
    cm_json_put_kv_num(b, "dot", s->flops_dot, 6);
    cm_json_put_kv_num(b, "elementwise", s->flops_elementwise, 6);
    cm_json_put_kv_num(b, "reduce", s->flops_reduce, 6);
    cm_json_put_kv_num(b, "other", s->flops_other, 6);
    cm_buf_puts(b, "},\"memory_traffic_bytes\":");
    cm_json_put_num(b, s->mem_traffic_bytes, 6);
    cm_buf_puts(b, ",\n \"communication\":{\"bytes\":");
    cm_json_put_num(b, s->comm_bytes, 6);
    cm_json_put_kv_num(b, "seconds", s->comm_s, 6);
    cm_buf_puts(b, ",\"per_axis\":[");
    for (uint32_t i = 0; i < c->n_axes; i++) {
        const sp_cost_axis *a = &c->axes[i];
        cm_buf_puts(b, i > 0 ? ",{\"axes\":" : "{\"axes\":");
        cm_json_put_cstr(b, a->axes);
        cm_json_put_kv_num(b, "bytes", a->bytes, 6);
        cm_json_put_kv_num(b, "seconds", a->time_s, 6);
        cm_buf_printf(b, ",\"collectives\":%u", a->n_colls);
        cm_json_put_kv_num(b, "runs", a->runs, 6);
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "],\"per_kind\":[");
    bool first_kind = true;
    for (int kk = 0; kk < SP_COLL_N_KINDS; kk++) {
        if (s->kind_colls[kk] == 0) {
            continue;
        }
        cm_buf_puts(b, first_kind ? "{\"kind\":" : ",{\"kind\":");
        first_kind = false;
        cm_json_put_cstr(b, sp_coll_kind_name((sp_coll_kind)kk));
        cm_json_put_kv_num(b, "bytes", s->kind_bytes[kk], 6);
        cm_json_put_kv_num(b, "seconds", s->kind_s[kk], 6);
        cm_buf_printf(b, ",\"collectives\":%u}", s->kind_colls[kk]);
    }
    cm_buf_printf(b, "],\"n_collectives\":%u,\"collectives\":[", c->n_colls);
    for (uint32_t i = 0; i < c->n_colls && i < JSON_MAX_COLLS; i++) {
        const sp_cost_coll *k = &c->colls[i];
        const sp_op *o = &m->ops[k->op];
        cm_buf_puts(b, i > 0 ? ",\n  {\"op\":" : "\n  {\"op\":");
        cm_json_put_cstr(b, o->name);
        if (with_lines && o->line > 0) {
            cm_buf_puts(b, ",\"line\":");
            cm_buf_put_i64(b, o->line);
        }
        if (k->operand != SP_NONE) {
            cm_buf_puts(b, ",\"operand\":");
            cm_buf_put_i64(b, k->operand);
        }
        cm_buf_puts(b, ",\"kind\":\"");
        cm_buf_puts(b, sp_coll_kind_name(k->kind));
        cm_buf_puts(b, k->implied ? "\",\"implied\":true,\"axes\":["
                                  : "\",\"implied\":false,\"axes\":[");
        for (uint32_t j = 0; j < k->n_axes; j++) {
            cm_json_put_sep(b);
            cm_json_put_cstr(b, k->axes[j]);
        }
        cm_buf_puts(b, "],\"group\":");
        cm_buf_put_i64(b, k->group);
        cm_buf_puts(b, ",\"tensor_bytes\":");
        cm_json_put_num(b, k->tensor_bytes, 6);
        put_num_after(b, ",\"bytes\":", k->bytes);
        put_num_after(b, ",\"seconds\":", k->time_s);
        if (k->count != 1) {
            put_num_after(b, ",\"count\":", k->count);
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "]},\n \"time\":{\"compute_s\":");
    cm_json_put_num(b, s->compute_s, 6);
    cm_json_put_kv_num(b, "communication_s", s->comm_s, 6);
    cm_json_put_kv_num(b, "overlap", s->overlap, 6);
    cm_json_put_kv_num(b, "hidden_s", s->hidden_s, 6);
    cm_json_put_kv_num(b, "step_s", s->step_s, 6);
    cm_buf_puts(b, "}}");
}

void sp_cost_write_json(const sp_cost *c, const sp_module *m, cm_buf *b)
{
    write_json(c, m, b, true);
}

#define TEXT_MAX_COLLS 40u

void sp_cost_write_text(const sp_cost *c, const sp_module *m, cm_buf *b)
{
    const sp_cost_summary *s = &c->s;
    char t1[48], t2[48], t3[48];
    cm_buf_printf(b, "cost per device (%lld devices, profile %s, %u ops)\n", (long long)s->devices,
                  s->profile, s->n_ops);
    cm_buf_printf(b, "  %s\n\n", mode_note(s));
    cm_buf_puts(b, "memory\n");
    human_bytes(t1, sizeof t1, s->param_bytes);
    cm_buf_printf(b, "  parameters           %12s\n", t1);
    human_bytes(t1, sizeof t1, s->input_bytes);
    cm_buf_printf(b, "  inputs               %12s\n", t1);
    human_bytes(t1, sizeof t1, s->peak_activation_bytes);
    cm_buf_printf(b, "  peak activations     %12s\n", t1);
    human_bytes(t1, sizeof t1, s->peak_bytes);
    human_bytes(t2, sizeof t2, s->capacity_bytes);
    cm_buf_printf(b, "  peak total           %12s  of %s\n", t1, s->capacity_bytes > 0 ? t2 : "?");
    if (s->peak_op != SP_NONE) {
        const sp_op *po = &m->ops[s->peak_op];
        cm_buf_printf(b, "  peak at              %s line %u", po->name, po->line);
        if (s->peak_inner_op != SP_NONE) {
            const sp_op *pi = &m->ops[s->peak_inner_op];
            cm_buf_printf(b, ", inside it %s line %u", pi->name, pi->line);
        }
        cm_buf_putc(b, '\n');
    }
    if (!s->fits) {
        char oom[128];
        sp_cost_oom_message(c, oom, sizeof oom);
        cm_buf_printf(b, "  %s\n", oom);
    }
    cm_buf_puts(b, "\ncompute\n");
    human_flops(t1, sizeof t1, s->flops);
    cm_buf_printf(b, "  FLOPs                %12s\n", t1);
    human_flops(t1, sizeof t1, s->flops_dot);
    human_flops(t2, sizeof t2, s->flops_elementwise);
    human_flops(t3, sizeof t3, s->flops_reduce);
    cm_buf_printf(b, "    dot/conv %s, element-wise %s, reductions %s\n", t1, t2, t3);
    human_bytes(t1, sizeof t1, s->mem_traffic_bytes);
    cm_buf_printf(b, "  memory traffic       %12s\n", t1);
    cm_buf_puts(b, "\ncommunication\n");
    human_bytes(t1, sizeof t1, s->comm_bytes);
    human_time(t2, sizeof t2, s->comm_s);
    cm_buf_printf(b, "  total                %12s  %10s\n", t1, t2);
    for (uint32_t i = 0; i < c->n_axes; i++) {
        const sp_cost_axis *a = &c->axes[i];
        human_bytes(t1, sizeof t1, a->bytes);
        human_time(t2, sizeof t2, a->time_s);
        cm_buf_printf(b, "  axes %-15s %12s  %10s  (%u collectives)\n", a->axes, t1, t2,
                      a->n_colls);
    }
    if (c->n_colls > 0) {
        cm_buf_printf(b, "  %-22s %-8s %-14s %-6s %10s %10s\n", "collective", "line", "axes",
                      "group", "tensor", "wire");
    }
    for (uint32_t i = 0; i < c->n_colls && i < TEXT_MAX_COLLS; i++) {
        const sp_cost_coll *k = &c->colls[i];
        char ax[64] = "";
        size_t l = 0;
        for (uint32_t j = 0; j < k->n_axes && l < sizeof ax; j++) {
            int w = snprintf(ax + l, sizeof ax - l, "%s%s", j > 0 ? "," : "", k->axes[j]);
            l = w > 0 ? l + (size_t)w : l;
        }
        char kind[40];
        snprintf(kind, sizeof kind, "%s%s", sp_coll_kind_name(k->kind), k->implied ? "*" : "");
        human_bytes(t1, sizeof t1, k->tensor_bytes);
        human_bytes(t2, sizeof t2, k->bytes);
        cm_buf_printf(b, "  %-22s %-8u %-14s %-6lld %10s %10s\n", kind, m->ops[k->op].line, ax,
                      (long long)k->group, t1, t2);
    }
    if (c->n_colls > TEXT_MAX_COLLS) {
        cm_buf_printf(b, "  ... %u more (--format json lists them all)\n",
                      c->n_colls - TEXT_MAX_COLLS);
    }
    if (c->n_colls > 0 && !s->partitioned) {
        cm_buf_puts(b, "  * implied by the op's shardings (not yet partitioned)\n");
    }
    cm_buf_puts(b, "\npredicted step time\n");
    human_time(t1, sizeof t1, s->compute_s);
    cm_buf_printf(b, "  compute              %12s\n", t1);
    human_time(t1, sizeof t1, s->comm_s);
    cm_buf_printf(b, "  communication        %12s\n", t1);
    human_time(t1, sizeof t1, s->hidden_s);
    cm_buf_printf(b, "  hidden (overlap %.2f) %11s\n", s->overlap, t1);
    human_time(t1, sizeof t1, s->step_s);
    cm_buf_printf(b, "  step                 %12s\n", t1);
}

/* ---- memory over program order ---------------------------------------------------------- */

void sp_cost_write_memory_json(const sp_cost *c, const sp_module *m, uint32_t max_points,
                               bool with_lines, cm_buf *b)
{
    const sp_cost_summary *s = &c->s;
    double resident = s->param_bytes + s->input_bytes;
    cm_buf_printf(b, "{\"devices\":%lld,\"same_on_every_device\":true", (long long)s->devices);
    cm_json_put_kv_num(b, "parameter_bytes", s->param_bytes, 6);
    cm_json_put_kv_num(b, "input_bytes", s->input_bytes, 6);
    cm_json_put_kv_num(b, "capacity_bytes", s->capacity_bytes, 6);
    /* the peak point: the first of largest live bytes */
    uint32_t pk = SP_NONE;
    for (uint32_t i = 0; i < c->n_mem; i++) {
        const sp_cost_mem_point *p = &c->mem[i];
        if (pk == SP_NONE || p->activation_bytes + p->temporary_bytes >
                                 c->mem[pk].activation_bytes + c->mem[pk].temporary_bytes) {
            pk = i;
        }
    }
    cm_buf_puts(b, ",\n \"peak\":{\"bytes\":");
    cm_json_put_num(b, s->peak_bytes, 6);
    if (pk != SP_NONE) {
        cm_buf_printf(b, ",\"index\":%u", pk);
        cm_json_put_kv_num(b, "activation_bytes", c->mem[pk].activation_bytes, 6);
        cm_json_put_kv_num(b, "temporary_bytes", c->mem[pk].temporary_bytes, 6);
        put_op_where(c, b, m, c->mem[pk].op, with_lines);
        if (c->mem[pk].inner_op != SP_NONE) {
            cm_buf_puts(b, ",\"inner\":{");
            put_op_where(c, b, m, c->mem[pk].inner_op, with_lines);
            cm_buf_putc(b, '}');
        }
    }
    cm_buf_puts(b, "},\n \"largest_buffers\":[");
    for (uint32_t i = 0; i < c->n_bufs; i++) {
        const sp_cost_buffer *k = &c->bufs[i];
        const sp_value *v = &m->values[k->value];
        const sp_type *t = sp_value_type(m, k->value);
        cm_buf_puts(b, i > 0 ? ",\n  {\"kind\":" : "\n  {\"kind\":");
        cm_json_put_cstr(b, sp_cost_buf_kind_name(k->kind));
        put_num_after(b, ",\"bytes\":", k->bytes);
        cm_buf_puts(b, ",\"dtype\":");
        cm_json_put_cstr(b, t->kind == SP_TYPE_TENSOR ? sp_elem_name(t->elem) : NULL);
        cm_buf_puts(b, ",\"shape\":[");
        for (uint32_t d = 0; t->kind == SP_TYPE_TENSOR && d < t->rank; d++) {
            if (d > 0) {
                cm_buf_putc(b, ',');
            }
            cm_buf_put_i64(b, t->dims[d]);
        }
        cm_buf_putc(b, ']');
        if (v->def == SP_NONE) {
            cm_buf_puts(b, ",\"argument\":");
            cm_buf_put_i64(b, v->index);
            cm_buf_puts(b, ",\"name\":");
            cm_json_put_cstr(b, name_of(c, m, k->value));
        } else {
            put_op_where(c, b, m, v->def, with_lines);
        }
        cm_buf_putc(b, '}');
    }
    uint32_t stride = 1;
    if (max_points > 0 && c->n_mem > max_points) {
        stride = c->n_mem / max_points + (c->n_mem % max_points != 0);
    }
    cm_buf_puts(b, "],\n \"n_ops\":");
    cm_buf_put_i64(b, c->n_mem);
    cm_buf_puts(b, ",\"stride\":");
    cm_buf_put_i64(b, stride);
    cm_buf_puts(b, ",\"points\":[");
    for (uint32_t i = 0; i < c->n_mem; i += stride) {
        uint32_t best = i;
        for (uint32_t j = i; j < i + stride && j < c->n_mem; j++) {
            if (c->mem[j].activation_bytes + c->mem[j].temporary_bytes >
                c->mem[best].activation_bytes + c->mem[best].temporary_bytes) {
                best = j;
            }
        }
        const sp_cost_mem_point *p = &c->mem[best];
        cm_buf_puts(b, i > 0 ? ",\n  {\"index\":" : "\n  {\"index\":");
        cm_buf_put_i64(b, best);
        put_op_where(c, b, m, p->op, with_lines);
        put_num_after(b, ",\"activation_bytes\":", p->activation_bytes);
        put_num_after(b, ",\"temporary_bytes\":", p->temporary_bytes);
        put_num_after(b, ",\"live_bytes\":", resident + p->activation_bytes + p->temporary_bytes);
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "]}");
}

#define PLAN_MEM_POINTS 2048u /* the plan document's timeline, at most */

void sp_cost_plan_section(sp_module *m, const sp_custom_rules *custom, cm_buf *out)
{
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    /* Parameters are told from inputs by structure only and no source lines
     * are written, so a graph document and its MLIR give the same section. */
    o.custom = custom;
    o.timeline = true;
    sp_cost *c = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_buf_puts(out, ",\n\"cost\":");
    if (sp_cost_compute(m, &o, &c, &err) != CM_OK) {
        if (err.code == CM_ENOMEM) {
            out->oom = true; /* the plan writer reports ENOMEM */
        }
        cm_buf_puts(out, "null,\n\"memory\":null");
        return;
    }
    write_json(c, m, out, false);
    cm_buf_puts(out, ",\n\"memory\":");
    sp_cost_write_memory_json(c, m, PLAN_MEM_POINTS, false, out);
    sp_cost_destroy(c);
}
