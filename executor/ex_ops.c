/* SPDX-License-Identifier: Apache-2.0
 * executor: local ops on one device's blocks (ex_int.h): the buffers of a
 * worker, element-wise jobs spread over a worker's pool (ex_par), and every
 * non-collective op, through the kernels of ex_kern.c where there is one and
 * element by element through doubles (elem_load, elem_store) where there is
 * not. */
#include "ex_int.h"

#include <math.h>
#include <string.h>

#include "ex_mem_int.h"

/* ---- buffers, copies and element-wise jobs ----------------------------------------- */

/* Copies a box of extent ext from src (dims sd, starting at so) into dst
 * (dims dd, starting at do_); accumulate adds instead (elem_add). */
void ex_box_copy(const void *src, const int64_t *sd, const int64_t *so, void *dst,
                     const int64_t *dd, const int64_t *do_, const int64_t *ext, uint32_t rank,
                     sp_elem e, size_t esz, bool accumulate)
{
    for (uint32_t k = 0; k < rank; k++) {
        if (ext[k] <= 0) {
            return;
        }
    }
    if (rank == 0) {
        if (accumulate) {
            elem_add(dst, 0, src, 0, e);
        } else {
            memcpy(dst, src, esz);
        }
        return;
    }
    int64_t c[EX_MAX_RANK] = {0};
    int64_t inner = ext[rank - 1];
    do {
        size_t si = 0, di = 0;
        for (uint32_t k = 0; k < rank; k++) {
            si = si * (size_t)sd[k] + (size_t)(so[k] + c[k]);
            di = di * (size_t)dd[k] + (size_t)(do_[k] + c[k]);
        }
        if (accumulate && e == SP_ELEM_F32) {
            float *d = (float *)dst + di;
            const float *s = (const float *)src + si;
            for (int64_t i = 0; i < inner; i++) {
                d[i] += s[i];
            }
        } else if (accumulate) {
            for (int64_t i = 0; i < inner; i++) {
                elem_add(dst, di + (size_t)i, src, si + (size_t)i, e);
            }
        } else {
            memcpy((char *)dst + di * esz, (const char *)src + si * esz, (size_t)inner * esz);
        }
    } while (next_coord(c, ext, rank - 1));
}

/* One dimension of an affine gather: operand index = bias + scale * c[rdim],
 * or bias alone when rdim < 0. */
typedef ex_amap amap;

static ex_par *pool_of(const prog *p, uint32_t dev)
{
    return p->par != NULL ? p->par[dev] : NULL;
}

/* Loops of fewer elements than this stay on one thread (ex_par). */
#define PAR_MIN ((size_t)64 << 10)

/* An element-wise kernel over [0, n), cut into slices (elem_part): each
 * array advances by its bytes per element (0: a scalar, not advanced). */
typedef enum ekind { EK_BINARY, EK_UNARY, EK_CONVERT, EK_COMPARE, EK_SELECT } ekind;

typedef struct elem_job {
    ekind what;
    sp_op_kind k;
    int dir;          /* compare direction */
    sp_elem ie, oe;   /* operand and result element types */
    const char *a, *b, *c;
    char *out;
    size_t sa, sb, sc, so;
    size_t n;
    bool ok[EX_PAR_MAX];
} elem_job;

static void elem_part(void *ctx, uint32_t part, uint32_t parts)
{
    elem_job *j = ctx;
    size_t lo, hi;
    ex_par_slice(j->n, 64, part, parts, &lo, &hi);
    const char *a = j->a + lo * j->sa, *b = j->b != NULL ? j->b + lo * j->sb : NULL;
    const char *c = j->c != NULL ? j->c + lo * j->sc : NULL;
    char *o = j->out + lo * j->so;
    size_t n = hi - lo;
    bool ok = true;
    switch (j->what) {
    case EK_BINARY:
        ok = ex_kern_binary(j->k, j->oe, a, b, o, n);
        break;
    case EK_UNARY:
        ok = j->ie == j->oe && ex_kern_unary(j->k, j->ie, a, o, n);
        break;
    case EK_CONVERT:
        ok = ex_kern_convert(j->ie, a, j->oe, o, n);
        break;
    case EK_COMPARE:
        ok = j->oe == SP_ELEM_I1 && ex_kern_compare(j->dir, j->ie, a, b, (uint8_t *)o, n);
        break;
    case EK_SELECT:
        ex_kern_select((const uint8_t *)a, j->sa == 0, b, c, o, n, j->so);
        break;
    }
    j->ok[part] = ok;
}

/* Runs j on dev's pool when it has one and j is large, else on this
 * thread. false: no kernel for these types (nothing was written). */
static bool run_elem(const prog *p, uint32_t dev, elem_job *j)
{
    ex_par *pool = pool_of(p, dev);
    if (pool == NULL || j->n < PAR_MIN) {
        elem_part(j, 0, 1);
        return j->ok[0];
    }
    ex_par_run(pool, elem_part, j);
    bool ok = true;
    for (uint32_t i = 0; i < ex_par_width(pool); i++) {
        ok = ok && j->ok[i];
    }
    return ok;
}

/* An affine gather cut along dst's first dimension (affine_part). */
typedef struct affine_job {
    const void *src;
    const int64_t *sdims, *ddims;
    uint32_t srank, drank;
    const amap *map;
    char *dst;
    size_t esz;
} affine_job;

static void affine_part(void *ctx, uint32_t part, uint32_t parts)
{
    const affine_job *j = ctx;
    size_t lo, hi;
    ex_par_slice((size_t)j->ddims[0], 1, part, parts, &lo, &hi);
    if (hi <= lo) {
        return;
    }
    /* Rows [lo, hi) of dst: c[0] counts from lo, so the source index of a
     * dimension that follows c[0] starts scale * lo further. */
    int64_t dd[EX_MAX_RANK];
    amap m[EX_MAX_RANK];
    memcpy(dd, j->ddims, sizeof(int64_t) * j->drank);
    dd[0] = (int64_t)(hi - lo);
    for (uint32_t k = 0; k < j->srank; k++) {
        m[k] = j->map[k];
        if (m[k].rdim == 0) {
            m[k].bias += m[k].scale * (int64_t)lo;
        }
    }
    size_t row = count_of(j->ddims + 1, j->drank - 1) * j->esz;
    ex_kern_affine(j->src, j->sdims, j->srank, m, j->dst + lo * row, dd, j->drank, j->esz);
}

/* dst[c] = src[map(c)] over dst's dims; positions that fall outside src
 * (padding of a non-divisible shard) get zero. With a pool (a worker with
 * cores of its own), large gathers are cut along dst's first dimension. */
static void gather_affine(ex_par *pool, const void *src, const int64_t *sdims, uint32_t srank,
                          const amap *map, void *dst, const int64_t *ddims, uint32_t drank,
                          size_t esz)
{
    affine_job j = {src, sdims, ddims, srank, drank, map, dst, esz};
    if (pool == NULL || drank == 0 || drank > EX_MAX_RANK || srank > EX_MAX_RANK ||
        ddims[0] < 2 || count_of(ddims, drank) < PAR_MIN) {
        ex_kern_affine(src, sdims, srank, map, dst, ddims, drank, esz);
        return;
    }
    ex_par_run(pool, affine_part, &j);
}

/* A zeroed buffer for value v. bufs (a worker's value array, or NULL) holds
 * after its n_values entries the spare buffer of each value kept from the
 * previous iteration (ex_buf_release): reusing it saves the page faults and unmaps
 * of large fresh buffers, which cost more than the copies of a collective. */
void *ex_buf_alloc(const prog *p, void **bufs, uint32_t v, bool zero)
{
    size_t bytes = (p->vi[v].lcount + 1u) * p->vi[v].esz;
    if (bufs != NULL && bufs[p->m->n_values + v] != NULL) {
        void *b = bufs[p->m->n_values + v];
        bufs[p->m->n_values + v] = NULL;
        if (zero) {
            memset(b, 0, bytes);
        }
        return b;
    }
    return ex_mem_alloc(p->vi[v].lcount + 1u, p->vi[v].esz, true);
}

void *ex_buf_zalloc(const prog *p, void **bufs, uint32_t v)
{
    return ex_buf_alloc(p, bufs, v, true);
}

/* True when device dev's block of v has no padding: a collective that copies
 * the group's blocks then writes every element of it, so a reused buffer
 * need not be zeroed first. */
bool ex_is_unpadded(const prog *p, uint32_t v, uint32_t dev)
{
    const vinfo *vi = &p->vi[v];
    const int64_t *off = &vi->off[dev * vi->rank];
    for (uint32_t k = 0; k < vi->rank; k++) {
        int64_t n = vi->gdims[k] - off[k];
        if (n < vi->ldims[k]) {
            return false;
        }
    }
    return true;
}

/* Frees bufs[v], or keeps it as v's spare when another iteration follows. */
void ex_buf_release(const prog *p, void **bufs, uint32_t v, bool keep)
{
    if (keep && bufs[p->m->n_values + v] == NULL) {
        bufs[p->m->n_values + v] = bufs[v];
    } else {
        cm_free(bufs[v]);
    }
    bufs[v] = NULL;
}

/* Operand v as seen in the block of result r (same rank): v's own buffer when
 * the blocks agree, else a temporary (*tmp, freed by the caller). */
static const void *view_as(const prog *p, void **bufs, uint32_t dev, uint32_t v, uint32_t r,
                           void **tmp)
{
    const vinfo *a = &p->vi[v], *b = &p->vi[r];
    *tmp = NULL;
    if (a->rank == 0) {
        return bufs[v];
    }
    bool same = a->rank == b->rank;
    for (uint32_t k = 0; same && k < a->rank; k++) {
        same = a->ldims[k] == b->ldims[k] && voff(p, v, dev)[k] == voff(p, r, dev)[k];
    }
    if (same) {
        return bufs[v];
    }
    amap map[EX_MAX_RANK];
    for (uint32_t k = 0; k < a->rank; k++) {
        map[k].rdim = (int32_t)k;
        map[k].scale = 1;
        map[k].bias = voff(p, r, dev)[k] - voff(p, v, dev)[k];
    }
    *tmp = cm_calloc(b->lcount + 1u, a->esz);
    if (*tmp == NULL) {
        return NULL;
    }
    gather_affine(pool_of(p, dev), bufs[v], a->ldims, a->rank, map, *tmp, b->ldims, b->rank,
                  a->esz);
    return *tmp;
}

/* ---- element-wise through doubles, dot_general, reduce ----------------------------- */

static double unary(sp_op_kind k, double x)
{
    switch (k) {
    case SP_OP_NEGATE:
        return -x;
    case SP_OP_EXPONENTIAL:
        return exp(x);
    case SP_OP_TANH:
        return tanh(x);
    case SP_OP_ABS:
        return fabs(x);
    case SP_OP_SQRT:
        return sqrt(x);
    case SP_OP_RSQRT:
        return 1.0 / sqrt(x);
    case SP_OP_LOG:
        return log(x);
    case SP_OP_LOGISTIC:
        return 1.0 / (1.0 + exp(-x));
    default:
        return x;
    }
}

static double binary(sp_op_kind k, double x, double y, bool is_int)
{
    switch (k) {
    case SP_OP_ADD:
        return x + y;
    case SP_OP_SUBTRACT:
        return x - y;
    case SP_OP_MULTIPLY:
        return x * y;
    case SP_OP_DIVIDE:
        return is_int ? (y == 0 ? 0 : trunc(x / y)) : x / y;
    case SP_OP_MAXIMUM:
        return isnan(x) || isnan(y) ? (double)NAN : (x > y ? x : y);
    case SP_OP_MINIMUM:
        return isnan(x) || isnan(y) ? (double)NAN : (x < y ? x : y);
    default:
        return 0;
    }
}

static double reduce_fn(int fn, double acc, double x)
{
    switch (fn) {
    case RED_ADD:
        return acc + x;
    case RED_MAX:
        return isnan(acc) || isnan(x) ? (double)NAN : (x > acc ? x : acc);
    case RED_MIN:
        return isnan(acc) || isnan(x) ? (double)NAN : (x < acc ? x : acc);
    case RED_MUL:
        return acc * x;
    case RED_AND:
        return (acc != 0 && x != 0) ? 1 : 0;
    default:
        return (acc != 0 || x != 0) ? 1 : 0;
    }
}

/* what is a message about the op, e.g. "local shapes disagree". */
cm_status ex_local_error(const prog *p, const xop *x, cm_error *err, const char *what)
{
    return ex_op_error(p, x->op, err, "%s: %s", p->m->ops[x->op].name, what);
}

static bool is_half_elem(sp_elem e)
{
    return e == SP_ELEM_BF16 || e == SP_ELEM_F16;
}

/* v's block as f32: itself when it is f32, else a converted copy in *tmp. */
static const float *as_f32(const vinfo *V, const void *data, float **tmp)
{
    *tmp = NULL;
    if (V->elem == SP_ELEM_F32) {
        return data;
    }
    *tmp = cm_alloc(sizeof(float) * (V->lcount + 1u));
    if (*tmp != NULL) {
        ex_kern_half_to_f32(V->elem, data, *tmp, V->lcount);
    }
    return *tmp;
}

/* A dot_general with bf16/f16 operands or result: one sgemm on f32 copies,
 * accumulating in f32, the result rounded once to its type. */
static cm_status half_dot(const prog *p, const xop *x, const vinfo *L, const void *l,
                          const vinfo *R, const void *rd, const vinfo *O, void *out)
{
    (void)p;
    float *tl = NULL, *tr = NULL, *to = NULL;
    const float *fl = as_f32(L, l, &tl), *fr = as_f32(R, rd, &tr);
    float *fo = O->elem == SP_ELEM_F32 ? out : (to = cm_alloc(sizeof(float) * (O->lcount + 1u)));
    cm_status st = CM_ENOMEM;
    if (fl != NULL && fr != NULL && fo != NULL) {
        st = ex_kern_dot(SP_ELEM_F32, fl, L->ldims, L->rank, fr, R->ldims, R->rank, x->a, x->b,
                         x->na, x->c, x->d, x->nc, fo);
        if (st == CM_OK && to != NULL) {
            ex_kern_f32_to_half(O->elem, to, out, O->lcount);
        }
    }
    cm_free(tl);
    cm_free(tr);
    cm_free(to);
    return st;
}

static cm_status masked_copy(const prog *p, uint32_t v, uint32_t dev, const int64_t *dims,
                             uint32_t n_dims, const void *fill, const void *data, void **out);

/* Device dev's block of a dot_general. Contracting over a padded shard (a
 * non-divisible contracting dim split over devices), the padding of both
 * operands is read as zeros: it holds whatever the reshard left there. */
static cm_status run_dot(const prog *p, const xop *x, void **bufs, uint32_t r, uint32_t dev,
                         cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t lv = o->operands[0], rv = o->operands[1];
    const vinfo *L = &p->vi[lv], *R = &p->vi[rv], *O = &p->vi[r];
    /* Orders: lhs [batch, free, contract], rhs [batch, contract, free]. */
    int64_t lperm[EX_MAX_RANK], rperm[EX_MAX_RANK];
    bool used[EX_MAX_RANK];
    uint32_t nl = 0, nr = 0;
    int64_t B = 1, M = 1, K = 1, N = 1;
    for (uint32_t i = 0; i < x->na; i++) {
        if (L->ldims[x->a[i]] != R->ldims[x->b[i]]) {
            return ex_local_error(p, x, err, "batch shards of the operands differ");
        }
        B *= L->ldims[x->a[i]];
    }
    for (uint32_t i = 0; i < x->nc; i++) {
        if (L->ldims[x->c[i]] != R->ldims[x->d[i]]) {
            return ex_local_error(p, x, err, "contracting shards of the operands differ");
        }
        K *= L->ldims[x->c[i]];
    }
    memset(used, 0, sizeof used);
    for (uint32_t i = 0; i < x->na; i++) {
        lperm[nl++] = x->a[i];
        used[x->a[i]] = true;
    }
    for (uint32_t i = 0; i < x->nc; i++) {
        used[x->c[i]] = true;
    }
    for (uint32_t k = 0; k < L->rank; k++) {
        if (!used[k]) {
            lperm[nl++] = k;
            M *= L->ldims[k];
        }
    }
    for (uint32_t i = 0; i < x->nc; i++) {
        lperm[nl++] = x->c[i];
    }
    memset(used, 0, sizeof used);
    for (uint32_t i = 0; i < x->nb; i++) {
        rperm[nr++] = x->b[i];
        used[x->b[i]] = true;
    }
    for (uint32_t i = 0; i < x->nd; i++) {
        rperm[nr++] = x->d[i];
        used[x->d[i]] = true;
    }
    for (uint32_t k = 0; k < R->rank; k++) {
        if (!used[k]) {
            rperm[nr++] = k;
            N *= R->ldims[k];
        }
    }
    /* The result's local shape must be [batch, lhs free, rhs free]. */
    uint32_t j = 0;
    bool shape_ok = O->rank == x->na + (L->rank - x->na - x->nc) + (R->rank - x->nb - x->nd);
    for (uint32_t i = 0; shape_ok && i < x->na; i++) {
        shape_ok = O->ldims[j++] == L->ldims[lperm[i]];
    }
    for (uint32_t i = x->na; shape_ok && i < L->rank - x->nc; i++) {
        shape_ok = O->ldims[j++] == L->ldims[lperm[i]];
    }
    for (uint32_t i = x->nb + x->nd; shape_ok && i < R->rank; i++) {
        shape_ok = O->ldims[j++] == R->ldims[rperm[i]];
    }
    if (!shape_ok || B * M > INT32_MAX || K > INT32_MAX || N > INT32_MAX) {
        return ex_local_error(p, x, err, "local shapes of operands and result disagree");
    }
    /* Straight on the operands when their layout allows (ex_kern_dot); every
     * element of the result is written. */
    const uint64_t zero[2] = {0, 0};
    void *ml = NULL, *mr = NULL;
    if (masked_copy(p, lv, dev, x->c, x->nc, zero, bufs[lv], &ml) != CM_OK ||
        masked_copy(p, rv, dev, x->d, x->nc, zero, bufs[rv], &mr) != CM_OK) {
        cm_free(ml);
        return cm_error_oom(err);
    }
    const void *lb = ml != NULL ? ml : bufs[lv], *rb = mr != NULL ? mr : bufs[rv];
    void *out = ex_buf_alloc(p, bufs, r, false);
    cm_status st = CM_ENOMEM;
    if (out == NULL) {
        /* st stays CM_ENOMEM */
    } else if (is_half_elem(L->elem) || is_half_elem(R->elem) || is_half_elem(O->elem)) {
        st = half_dot(p, x, L, lb, R, rb, O, out);
    } else {
        st = elem_float(O->elem)
                 ? ex_kern_dot(O->elem, lb, L->ldims, L->rank, rb, R->ldims, R->rank, x->a, x->b,
                               x->na, x->c, x->d, x->nc, out)
                 : ex_kern_dot_int(L->elem, lb, L->ldims, L->rank, R->elem, rb, R->ldims, R->rank,
                                   x->a, x->b, x->na, x->c, x->d, x->nc, O->elem, out);
    }
    cm_free(ml);
    cm_free(mr);
    if (st != CM_OK) {
        cm_free(out);
        return st == CM_ENOMEM ? cm_error_oom(err)
                               : ex_local_error(p, x, err, "no kernel for this element type");
    }
    bufs[r] = out;
    return CM_OK;
}

/* A copy of v's block on dev (data) in *out with the padding along dims
 * (the last shards of a split, non-divisible dimension) set to the element
 * at fill. *out NULL: no padding along them (the block is read as it is).
 * CM_ENOMEM only. */
static cm_status masked_copy(const prog *p, uint32_t v, uint32_t dev, const int64_t *dims,
                             uint32_t n_dims, const void *fill, const void *data, void **out)
{
    const vinfo *I = &p->vi[v];
    int64_t valid[EX_MAX_RANK];
    bool any = false;
    *out = NULL;
    for (uint32_t k = 0; k < I->rank; k++) {
        valid[k] = I->ldims[k];
    }
    for (uint32_t i = 0; i < n_dims; i++) {
        if (dims[i] >= 0 && dims[i] < (int64_t)I->rank) {
            uint32_t k = (uint32_t)dims[i];
            valid[k] = valid_len(I, k, voff(p, v, dev)[k]);
            any = any || valid[k] < I->ldims[k];
        }
    }
    if (!any || I->lcount == 0) {
        return CM_OK;
    }
    char *m = cm_alloc(I->lcount * I->esz + 1u);
    if (m == NULL) {
        return CM_ENOMEM;
    }
    memcpy(m, data, I->lcount * I->esz);
    int64_t c[EX_MAX_RANK] = {0};
    size_t i = 0;
    do {
        bool pad = false;
        for (uint32_t k = 0; k < I->rank && !pad; k++) {
            pad = c[k] >= valid[k];
        }
        if (pad) {
            memcpy(m + i * I->esz, fill, I->esz);
        }
        i++;
    } while (next_coord(c, I->ldims, I->rank));
    *out = m;
    return CM_OK;
}

/* A reduce's operand block on dev with the padding along its reduced
 * dimensions set to what leaves the result alone: 0 for add, 1 for
 * multiply, the init value for the idempotent max, min, and, or
 * (masked_copy). */
static cm_status mask_padding(const prog *p, const xop *x, void **bufs, uint32_t dev, void **out)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t in = o->operands[0], init = o->operands[1];
    const vinfo *I = &p->vi[in];
    uint64_t fill[2] = {0, 0};
    if (x->fn == RED_ADD || x->fn == RED_MUL) {
        elem_store(fill, I->elem, 0, x->fn == RED_MUL ? 1.0 : 0.0);
    } else if (p->vi[init].elem == I->elem) {
        memcpy(fill, bufs[init], I->esz);
    } else {
        elem_store(fill, I->elem, 0, elem_load(bufs[init], p->vi[init].elem, 0));
    }
    return masked_copy(p, in, dev, x->a, x->na, fill, bufs[in], out);
}

/* Device dev's block of a reduce. A partial result (x->once) starts from
 * the body's identity on every device but the first of its group, so the
 * all-reduce after it applies the init value once. */
static cm_status run_reduce(const prog *p, const xop *x, void **bufs, uint32_t r, uint32_t dev,
                            cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t in = o->operands[0], init = o->operands[1];
    const vinfo *I = &p->vi[in], *O = &p->vi[r];
    uint64_t ident[2] = {0, 0}; /* one element of the init's type */
    const void *initb = bufs[init];
    if (x->once != NULL && x->once[dev] == 0) {
        elem_store(ident, p->vi[init].elem, 0, x->fn == RED_MUL ? 1.0 : 0.0);
        initb = ident;
    }
    void *masked = NULL;
    cm_status mst = mask_padding(p, x, bufs, dev, &masked);
    if (mst != CM_OK) {
        return cm_error_oom(err);
    }
    const void *inb = masked != NULL ? masked : bufs[in];
    bool red[EX_MAX_RANK] = {false};
    for (uint32_t i = 0; i < x->na; i++) {
        if (x->a[i] < 0 || x->a[i] >= (int64_t)I->rank) {
            return ex_local_error(p, x, err, "bad reduce dimension");
        }
        red[x->a[i]] = true;
    }
    uint32_t j = 0;
    for (uint32_t k = 0; k < I->rank; k++) {
        if (!red[k] && (j >= O->rank || O->ldims[j++] != I->ldims[k])) {
            return ex_local_error(p, x, err, "local shapes of operand and result disagree");
        }
    }
    if (O->elem == I->elem && p->vi[init].elem == I->elem) {
        /* A native loop for the type and body (ex_kern_reduce), else the
         * generic one below. */
        void *kout = ex_buf_alloc(p, bufs, r, false);
        if (kout == NULL) {
            return cm_error_oom(err);
        }
        cm_status kst = ex_kern_reduce(x->fn, I->elem, inb, I->ldims, I->rank, red, initb, kout);
        if (kst == CM_OK) {
            cm_free(masked);
            bufs[r] = kout;
            return CM_OK;
        }
        cm_free(kout);
        if (kst == CM_ENOMEM) {
            cm_free(masked);
            return cm_error_oom(err);
        }
    }
    double *acc = cm_alloc(sizeof(double) * (O->lcount + 1u));
    void *out = ex_buf_zalloc(p, bufs, r);
    if (acc == NULL || out == NULL) {
        cm_free(acc);
        cm_free(out);
        cm_free(masked);
        return cm_error_oom(err);
    }
    double iv = elem_load(initb, p->vi[init].elem, 0);
    for (size_t i = 0; i < O->lcount; i++) {
        acc[i] = iv;
    }
    if (I->lcount > 0) {
        int64_t c[EX_MAX_RANK] = {0};
        size_t i = 0;
        do {
            size_t oi = 0;
            uint32_t q = 0;
            for (uint32_t k = 0; k < I->rank; k++) {
                if (!red[k]) {
                    oi = oi * (size_t)O->ldims[q++] + (size_t)c[k];
                }
            }
            acc[oi] = reduce_fn(x->fn, acc[oi], elem_load(inb, I->elem, i));
            i++;
        } while (next_coord(c, I->ldims, I->rank));
    }
    for (size_t i = 0; i < O->lcount; i++) {
        elem_store(out, O->elem, i, acc[i]);
    }
    cm_free(acc);
    cm_free(masked);
    bufs[r] = out;
    return CM_OK;
}

/* ---- ops with a kernel in ex_kern.c: running ---------------------------------------- */

static ex_block block_of(const prog *p, uint32_t dev, uint32_t v, void *data)
{
    const vinfo *vi = &p->vi[v];
    ex_block b = {data, vi->elem, vi->rank, vi->esz, vi->ldims, vi->gdims, voff(p, v, dev)};
    return b;
}

/* Whether global positions [a, b) of dimension k are in v's block on dev
 * (or the range is empty). */
static bool holds(const prog *p, uint32_t v, uint32_t dev, uint32_t k, int64_t a, int64_t b)
{
    const vinfo *vi = &p->vi[v];
    int64_t off = voff(p, v, dev)[k];
    return b <= a || (a >= off && b <= off + valid_len(vi, k, off));
}

/* True when device dev's block of v (an element-wise operand: the result's
 * shape, or a scalar) holds every element of the valid part of r's block:
 * an operand sharded where the result is replicated (a module given
 * partitioned, whose op lacks the sharding its operand has) does not. */
static bool view_holds(const prog *p, uint32_t v, uint32_t r, uint32_t dev)
{
    const vinfo *a = &p->vi[v], *b = &p->vi[r];
    if (a->rank == 0 || a->rank != b->rank) {
        return true;
    }
    for (uint32_t k = 0; k < b->rank; k++) {
        int64_t lo = voff(p, r, dev)[k];
        if (!holds(p, v, dev, k, lo, lo + valid_len(b, k, lo))) {
            return false;
        }
    }
    return true;
}

/* out (r's block) = v as seen in r's block (view_as). CM_ENOMEM only. */
static cm_status copy_view(const prog *p, void **bufs, uint32_t dev, uint32_t v, uint32_t r,
                           void *out)
{
    void *tmp = NULL;
    const void *a = view_as(p, bufs, dev, v, r, &tmp);
    if (a == NULL) {
        return CM_ENOMEM;
    }
    memcpy(out, a, p->vi[r].lcount * p->vi[r].esz);
    cm_free(tmp);
    return CM_OK;
}

static const char not_local[] = "the operand block does not hold what the result block needs "
                                "(this sharding of the op cannot be executed yet)";

/* How many of a grouped convolution's groups device dev holds (*gl; 1
 * without groups). With feature (batch) groups the device must hold whole
 * groups, the same ones, in the input's features (batch), the kernel's
 * output features and the result's: false when it does not. */
static bool conv_local_groups(const prog *p, const xop *x, uint32_t dev, int64_t *gl)
{
    const ex_conv_dims *cd = x->ext;
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], kv = o->operands[1], r = o->first_result;
    const vinfo *I = &p->vi[v], *K = &p->vi[kv], *O = &p->vi[r];
    int64_t groups = cd->fgc > 1 ? cd->fgc : cd->bgc;
    *gl = 1;
    if (groups <= 1) {
        return true;
    }
    /* the input dim split into groups, its extent per group, and the output
     * features per group */
    int64_t gd = cd->fgc > 1 ? cd->ifeat : cd->ib;
    int64_t per = cd->fgc > 1 ? K->gdims[cd->ki] : O->gdims[cd->ob];
    int64_t og = K->gdims[cd->ko] / groups;
    const int64_t *ioff = voff(p, v, dev), *koff = voff(p, kv, dev), *roff = voff(p, r, dev);
    bool inner_whole =
        cd->fgc > 1 ? K->ldims[cd->ki] == K->gdims[cd->ki] : O->ldims[cd->ob] == O->gdims[cd->ob];
    if (per == 0 || og == 0) {
        *gl = groups;
        return inner_whole && I->ldims[gd] == I->gdims[gd] &&
               K->ldims[cd->ko] == K->gdims[cd->ko] && O->ldims[cd->ofeat] == O->gdims[cd->ofeat];
    }
    *gl = I->ldims[gd] / per;
    return inner_whole && *gl >= 1 && I->ldims[gd] == *gl * per && ioff[gd] % per == 0 &&
           valid_len(I, (uint32_t)gd, ioff[gd]) == I->ldims[gd] && K->ldims[cd->ko] == *gl * og &&
           koff[cd->ko] == ioff[gd] / per * og &&
           valid_len(K, (uint32_t)cd->ko, koff[cd->ko]) == K->ldims[cd->ko] &&
           O->ldims[cd->ofeat] == *gl * og && roff[cd->ofeat] == koff[cd->ko] &&
           valid_len(O, (uint32_t)cd->ofeat, roff[cd->ofeat]) == O->ldims[cd->ofeat];
}

/* pad, dynamic_slice, dynamic_update_slice, gather, scatter, convolution on
 * device dev into out (every element written). */
static cm_status run_kern_op(const prog *p, const xop *x, void **bufs, uint32_t dev, void *out,
                             cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const int64_t *ioff = voff(p, v, dev), *roff = voff(p, r, dev);
    ex_block ob = block_of(p, dev, r, out);
    switch (x->kind) {
    case SP_OP_PAD: {
        int64_t sv[EX_MAX_RANK];
        for (uint32_t k = 0; k < I->rank; k++) {
            int64_t step = x->c[k] + 1, rl = valid_len(O, k, roff[k]);
            /* source elements landing in this result block */
            int64_t g0 = roff[k] - x->a[k], g1 = roff[k] + rl - x->a[k];
            g0 = g0 <= 0 ? 0 : (g0 + step - 1) / step;
            g1 = g1 <= 0 ? 0 : (g1 + step - 1) / step;
            g1 = g1 < I->gdims[k] ? g1 : I->gdims[k];
            if (!holds(p, v, dev, k, g0, g1)) {
                return ex_local_error(p, x, err, not_local);
            }
            sv[k] = valid_len(I, k, ioff[k]);
        }
        ex_kern_pad(bufs[v], I->ldims, sv, ioff, out, O->ldims, roff, I->rank, x->a, x->c,
                    bufs[o->operands[1]], O->esz);
        return CM_OK;
    }
    case SP_OP_DYNAMIC_SLICE: {
        amap map[EX_MAX_RANK];
        for (uint32_t k = 0; k < I->rank; k++) {
            int64_t s = scalar_index(p, bufs, o->operands[1 + k]), hi = I->gdims[k] - x->a[k];
            s = s < 0 ? 0 : (s > hi ? hi : s);
            if (!holds(p, v, dev, k, s + roff[k], s + roff[k] + valid_len(O, k, roff[k]))) {
                return ex_local_error(p, x, err, not_local);
            }
            map[k] = (amap){(int32_t)k, 1, s + roff[k] - ioff[k]};
        }
        gather_affine(pool_of(p, dev), bufs[v], I->ldims, I->rank, map, out, O->ldims, O->rank,
                      O->esz);
        return CM_OK;
    }
    case SP_OP_DYNAMIC_UPDATE_SLICE: {
        uint32_t u = o->operands[1];
        const vinfo *U = &p->vi[u];
        if (copy_view(p, bufs, dev, v, r, out) != CM_OK) {
            return cm_error_oom(err);
        }
        int64_t start[EX_MAX_RANK];
        for (uint32_t k = 0; k < O->rank; k++) {
            int64_t s = scalar_index(p, bufs, o->operands[2 + k]), hi = O->gdims[k] - U->gdims[k];
            start[k] = s < 0 ? 0 : (s > hi ? hi : s);
            /* update elements landing in this result block */
            int64_t a0 = roff[k] - start[k], a1 = roff[k] + valid_len(O, k, roff[k]) - start[k];
            a0 = a0 < 0 ? 0 : a0;
            a1 = a1 > U->gdims[k] ? U->gdims[k] : a1;
            if (!holds(p, u, dev, k, a0, a1)) {
                return ex_local_error(p, x, err, not_local);
            }
        }
        ex_block ub = block_of(p, dev, u, bufs[u]);
        ex_kern_place(&ub, start, &ob);
        return CM_OK;
    }
    case SP_OP_GATHER: {
        ex_block opb = block_of(p, dev, v, bufs[v]);
        ex_block ixb = block_of(p, dev, o->operands[1], bufs[o->operands[1]]);
        if (ex_kern_gather(x->ext, &opb, &ixb, &ob) != CM_OK) {
            return ex_local_error(p, x, err,
                               "the indices block does not line up with the result "
                               "block (this sharding cannot be executed yet)");
        }
        return CM_OK;
    }
    case SP_OP_SCATTER: {
        if (x->once != NULL && x->once[dev] == 0) {
            /* a partial result: the first device of the group holds the
             * operand, the others start from the combiner's identity */
            memset(out, 0, O->lcount * O->esz);
            for (size_t i = 0; x->fn == RED_MUL && i < O->lcount; i++) {
                elem_store(out, O->elem, i, 1.0);
            }
        } else if (copy_view(p, bufs, dev, v, r, out) != CM_OK) {
            return cm_error_oom(err);
        }
        ex_block ixb = block_of(p, dev, o->operands[1], bufs[o->operands[1]]);
        ex_block ub = block_of(p, dev, o->operands[2], bufs[o->operands[2]]);
        if (ex_kern_scatter(x->ext, x->fn, &ixb, &ub, &ob) != CM_OK) {
            return ex_local_error(p, x, err,
                               "no kernel for this element type and body, or the "
                               "indices block does not line up with the updates");
        }
        return CM_OK;
    }
    case SP_OP_SELECT_AND_SCATTER: {
        uint32_t sv = o->operands[1];
        const vinfo *S = &p->vi[sv];
        const int64_t *soff = voff(p, sv, dev);
        int64_t lo[EX_MAX_RANK];
        for (uint32_t k = 0; k < I->rank; k++) {
            lo[k] = x->nc ? x->c[2 * k] : 0;
            bool plain =
                x->a[k] == 1 && x->b[k] == 1 && lo[k] == 0 && (!x->nc || x->c[2 * k + 1] == 0);
            bool ok = plain ? I->ldims[k] == O->ldims[k] && ioff[k] == roff[k] &&
                                  S->ldims[k] == O->ldims[k] && soff[k] == roff[k]
                            : I->ldims[k] == I->gdims[k] && O->ldims[k] == O->gdims[k] &&
                                  S->ldims[k] == S->gdims[k];
            if (!ok) {
                return ex_local_error(p, x, err, not_local);
            }
        }
        int sel = x->dim == CMP_GE   ? EX_CMP_GE
                  : x->dim == CMP_GT ? EX_CMP_GT
                  : x->dim == CMP_LE ? EX_CMP_LE
                                     : EX_CMP_LT;
        const vinfo *N = &p->vi[o->operands[2]];
        cm_status st = CM_EINVAL;
        if (is_half_elem(O->elem)) { /* on f32 copies: picks and sums in f32 */
            float *ti = NULL, *ts = NULL, *tn = NULL;
            float *to = cm_alloc(sizeof(float) * (O->lcount + 1u));
            const float *fi = as_f32(I, bufs[v], &ti), *fs = as_f32(S, bufs[sv], &ts);
            const float *fn = as_f32(N, bufs[o->operands[2]], &tn);
            st = fi != NULL && fs != NULL && fn != NULL && to != NULL
                     ? ex_kern_select_scatter(SP_ELEM_F32, sel, x->nd == 1, x->fn, fi, I->ldims,
                                              I->rank, fs, S->ldims, x->a, x->b, lo, fn, to)
                     : CM_ENOMEM;
            if (st == CM_OK) {
                ex_kern_f32_to_half(O->elem, to, out, O->lcount);
            }
            cm_free(ti);
            cm_free(ts);
            cm_free(tn);
            cm_free(to);
        } else {
            st = ex_kern_select_scatter(O->elem, sel, x->nd == 1, x->fn, bufs[v], I->ldims, I->rank,
                                        bufs[sv], S->ldims, x->a, x->b, lo, bufs[o->operands[2]],
                                        out);
        }
        if (st != CM_OK) {
            return st == CM_ENOMEM
                       ? cm_error_oom(err)
                       : ex_local_error(p, x, err, "no kernel for this element type and body");
        }
        return CM_OK;
    }
    case SP_OP_REDUCE_WINDOW: {
        int64_t lo[EX_MAX_RANK];
        for (uint32_t k = 0; k < I->rank; k++) {
            lo[k] = x->nc ? x->c[2 * k] : 0;
            bool plain =
                x->a[k] == 1 && x->b[k] == 1 && lo[k] == 0 && (!x->nc || x->c[2 * k + 1] == 0);
            bool ok = plain ? I->ldims[k] == O->ldims[k] && ioff[k] == roff[k]
                            : I->ldims[k] == I->gdims[k] && O->ldims[k] == O->gdims[k];
            if (!ok) {
                return ex_local_error(p, x, err, not_local);
            }
        }
        const vinfo *N = &p->vi[o->operands[1]];
        cm_status st = CM_EINVAL;
        if (is_half_elem(O->elem)) { /* on f32 copies, the result rounded once */
            float *ti = NULL, *tn = NULL, *to = cm_alloc(sizeof(float) * (O->lcount + 1u));
            const float *fi = as_f32(I, bufs[v], &ti), *fn = as_f32(N, bufs[o->operands[1]], &tn);
            st = fi != NULL && fn != NULL && to != NULL
                     ? ex_kern_reduce_window(x->fn, SP_ELEM_F32, fi, I->ldims, I->rank, x->a, x->b,
                                             lo, fn, to, O->ldims)
                     : CM_ENOMEM;
            if (st == CM_OK) {
                ex_kern_f32_to_half(O->elem, to, out, O->lcount);
            }
            cm_free(ti);
            cm_free(tn);
            cm_free(to);
        } else {
            st = ex_kern_reduce_window(x->fn, O->elem, bufs[v], I->ldims, I->rank, x->a, x->b, lo,
                                       bufs[o->operands[1]], out, O->ldims);
        }
        if (st != CM_OK) {
            return st == CM_ENOMEM
                       ? cm_error_oom(err)
                       : ex_local_error(p, x, err, "no kernel for this element type and body");
        }
        return CM_OK;
    }
    default: { /* SP_OP_CONVOLUTION */
        ex_conv_dims cd = *(const ex_conv_dims *)x->ext;
        uint32_t kv = o->operands[1];
        const vinfo *K = &p->vi[kv];
        int64_t gl = 1;
        bool ok = conv_local_groups(p, x, dev, &gl);
        if (cd.fgc > 1) {
            cd.fgc = gl;
        } else if (cd.bgc > 1) {
            cd.bgc = gl;
        }
        ok = ok && I->ldims[cd.ib] == O->ldims[cd.ob] * cd.bgc &&
             I->ldims[cd.ifeat] == K->ldims[cd.ki] * cd.fgc &&
             K->ldims[cd.ko] == O->ldims[cd.ofeat];
        for (uint32_t j = 0; ok && j < cd.ns; j++) {
            ok = I->ldims[cd.is[j]] == I->gdims[cd.is[j]] &&
                 K->ldims[cd.ks[j]] == K->gdims[cd.ks[j]] &&
                 O->ldims[cd.os[j]] == O->gdims[cd.os[j]];
        }
        if (!ok || O->lcount > INT32_MAX || I->lcount > INT32_MAX || K->lcount > INT32_MAX) {
            return ex_local_error(p, x, err,
                               "a convolution sharded on a spatial dimension (or with groups, "
                               "not in whole groups) cannot be executed yet");
        }
        cm_status st;
        if (is_half_elem(O->elem)) { /* on f32 copies, the result rounded once */
            float *ti = NULL, *tk = NULL, *to = cm_alloc(sizeof(float) * (O->lcount + 1u));
            const float *fi = as_f32(I, bufs[v], &ti), *fk = as_f32(K, bufs[kv], &tk);
            st = CM_ENOMEM;
            if (fi != NULL && fk != NULL && to != NULL) {
                st = ex_kern_conv(SP_ELEM_F32, &cd, fi, I->ldims, fk, K->ldims, to, O->ldims,
                                  O->rank);
                if (st == CM_OK) {
                    ex_kern_f32_to_half(O->elem, to, out, O->lcount);
                }
            }
            cm_free(ti);
            cm_free(tk);
            cm_free(to);
        } else {
            st = ex_kern_conv(O->elem, &cd, bufs[v], I->ldims, bufs[kv], K->ldims, out, O->ldims,
                              O->rank);
        }
        if (st != CM_OK) {
            return st == CM_ENOMEM ? cm_error_oom(err)
                                   : ex_local_error(p, x, err, "no kernel for this element type");
        }
        return CM_OK;
    }
    }
}

/* sort on device dev into fresh result buffers: each result block must hold
 * the sort dimension whole (the partitioner gathers it) and each operand's
 * block what its result's block needs. */
static cm_status run_sort(const prog *p, const xop *x, void **bufs, uint32_t dev, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t n = o->n_operands, r0 = o->first_result, dim = (uint32_t)x->dim;
    const vinfo *O = &p->vi[r0];
    const int64_t *roff = voff(p, r0, dev);
    for (uint32_t j = 0; j < n; j++) {
        const vinfo *R = &p->vi[r0 + j];
        if (R->ldims[dim] != R->gdims[dim]) {
            return ex_local_error(p, x, err,
                               "a sort sharded along its sort dimension cannot be executed "
                               "(the partitioner must gather that dimension first)");
        }
        for (uint32_t k = 0; k < O->rank; k++) {
            int64_t a = roff[k], b = roff[k] + valid_len(O, k, roff[k]);
            if (R->ldims[k] != O->ldims[k] || voff(p, r0 + j, dev)[k] != a ||
                !holds(p, o->operands[j], dev, k, a, b)) {
                return ex_local_error(p, x, err, not_local);
            }
        }
    }
    const void **in = cm_calloc(n, sizeof *in);
    void **out = cm_calloc(n, sizeof *out), **tmp = cm_calloc(n, sizeof *tmp);
    sp_elem *el = cm_calloc(n, sizeof *el);
    cm_status st = in == NULL || out == NULL || tmp == NULL || el == NULL ? CM_ENOMEM : CM_OK;
    for (uint32_t j = 0; st == CM_OK && j < n; j++) {
        el[j] = p->vi[r0 + j].elem;
        in[j] = view_as(p, bufs, dev, o->operands[j], r0 + j, &tmp[j]);
        out[j] = ex_buf_alloc(p, bufs, r0 + j, false);
        st = in[j] == NULL || out[j] == NULL ? CM_ENOMEM : CM_OK;
    }
    if (st == CM_OK) {
        st = ex_kern_sort(n, el, in, out, O->ldims, O->rank, dim, x->ext, (uint32_t)x->fn);
    }
    for (uint32_t j = 0; out != NULL && j < n; j++) {
        if (st == CM_OK) {
            bufs[r0 + j] = out[j];
        } else {
            cm_free(out[j]);
        }
        cm_free(tmp != NULL ? tmp[j] : NULL);
    }
    cm_free(in);
    cm_free(out);
    cm_free(tmp);
    cm_free(el);
    if (st == CM_ENOMEM) {
        return cm_error_oom(err);
    }
    return st == CM_OK ? CM_OK : ex_local_error(p, x, err, "no kernel for these element types");
}

/* Runs one non-collective op on device dev. */
static cm_status compute_op(const prog *p, const xop *x, void **bufs, uint32_t dev, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t r = o->first_result;
    const vinfo *O = &p->vi[r];
    void *tmp[3] = {NULL, NULL, NULL};
    void *out = NULL;
    cm_status st = CM_OK;
    if (sp_op_is_elementwise(x->kind)) {
        for (uint32_t j = 0; j < o->n_operands; j++) {
            if (!view_holds(p, o->operands[j], r, dev)) {
                return ex_local_error(p, x, err, not_local);
            }
        }
    }
    switch (x->kind) {
    case SP_OP_DOT_GENERAL:
        return run_dot(p, x, bufs, r, dev, err);
    case SP_OP_REDUCE:
        return run_reduce(p, x, bufs, r, dev, err);
    case SP_OP_SORT:
        return run_sort(p, x, bufs, dev, err);
    default:
        break;
    }
    if (x->kind == SP_OP_RESHAPE && !x->gather_reshape) {
        /* A reshape of a value used for the last time takes its buffer
         * (same bytes) instead of copying it; the spare buffers follow, so
         * the next iteration allocates nothing either (ex_buf_alloc). */
        uint32_t v = o->operands[0];
        const vinfo *I = &p->vi[v];
        if (dies_at(x, v) && I->lcount == O->lcount && I->esz == O->esz && bufs[v] != NULL) {
            void **spare_v = &bufs[p->m->n_values + v], **spare_r = &bufs[p->m->n_values + r];
            if (*spare_v == NULL) {
                *spare_v = *spare_r;
                *spare_r = NULL;
            }
            bufs[r] = bufs[v];
            bufs[v] = NULL;
            return CM_OK;
        }
    }
    /* Every kernel below writes every element of the result. */
    out = ex_buf_alloc(p, bufs, r, false);
    if (out == NULL) {
        return cm_error_oom(err);
    }
    switch (x->kind) {
    case SP_OP_ADD:
    case SP_OP_SUBTRACT:
    case SP_OP_MULTIPLY:
    case SP_OP_DIVIDE:
    case SP_OP_MAXIMUM:
    case SP_OP_MINIMUM:
    case SP_OP_AND:
    case SP_OP_OR:
    case SP_OP_XOR:
    case SP_OP_REMAINDER:
    case SP_OP_ATAN2:
    case SP_OP_POWER:
    case SP_OP_SHIFT_LEFT:
    case SP_OP_SHIFT_RIGHT_LOGICAL:
    case SP_OP_SHIFT_RIGHT_ARITHMETIC: {
        const void *a = view_as(p, bufs, dev, o->operands[0], r, &tmp[0]);
        const void *b = view_as(p, bufs, dev, o->operands[1], r, &tmp[1]);
        if (a == NULL || b == NULL) {
            st = cm_error_oom(err);
            break;
        }
        elem_job j = {.what = EK_BINARY, .k = x->kind, .oe = O->elem, .a = a, .b = b,
                      .out = out, .sa = O->esz, .sb = O->esz, .so = O->esz, .n = O->lcount};
        if (run_elem(p, dev, &j)) {
            break;
        }
        if (x->kind != SP_OP_ADD && x->kind != SP_OP_SUBTRACT && x->kind != SP_OP_MULTIPLY &&
            x->kind != SP_OP_DIVIDE && x->kind != SP_OP_MAXIMUM && x->kind != SP_OP_MINIMUM) {
            st = ex_local_error(p, x, err, "no kernel for this element type");
            break;
        }
        if (O->elem == SP_ELEM_F32 && x->kind != SP_OP_MAXIMUM && x->kind != SP_OP_MINIMUM) {
            const float *fa = a, *fb = b;
            float *fo = out;
            for (size_t i = 0; i < O->lcount; i++) {
                fo[i] = x->kind == SP_OP_ADD        ? fa[i] + fb[i]
                        : x->kind == SP_OP_SUBTRACT ? fa[i] - fb[i]
                        : x->kind == SP_OP_MULTIPLY ? fa[i] * fb[i]
                                                    : fa[i] / fb[i];
            }
            break;
        }
        bool is_int = !elem_float(O->elem);
        for (size_t i = 0; i < O->lcount; i++) {
            elem_store(out, O->elem, i,
                       binary(x->kind, elem_load(a, O->elem, i), elem_load(b, O->elem, i), is_int));
        }
        break;
    }
    case SP_OP_NEGATE:
    case SP_OP_EXPONENTIAL:
    case SP_OP_TANH:
    case SP_OP_ABS:
    case SP_OP_SQRT:
    case SP_OP_RSQRT:
    case SP_OP_LOG:
    case SP_OP_LOGISTIC:
    case SP_OP_NOT:
    case SP_OP_SIGN:
    case SP_OP_CBRT:
    case SP_OP_CEIL:
    case SP_OP_FLOOR:
    case SP_OP_COSINE:
    case SP_OP_SINE:
    case SP_OP_EXPONENTIAL_MINUS_ONE:
    case SP_OP_LOG_PLUS_ONE:
    case SP_OP_ROUND_NEAREST_AFZ:
    case SP_OP_ROUND_NEAREST_EVEN:
    case SP_OP_POPCNT:
    case SP_OP_CONVERT: {
        uint32_t v = o->operands[0];
        const void *a = view_as(p, bufs, dev, v, r, &tmp[0]);
        if (a == NULL) {
            st = cm_error_oom(err);
            break;
        }
        sp_elem ie = p->vi[v].elem;
        elem_job j = {.what = x->kind == SP_OP_CONVERT ? EK_CONVERT : EK_UNARY, .k = x->kind,
                      .ie = ie, .oe = O->elem, .a = a, .out = out, .sa = p->vi[v].esz,
                      .so = O->esz, .n = O->lcount};
        if (run_elem(p, dev, &j)) {
            break;
        }
        if (x->kind != SP_OP_CONVERT && x->kind != SP_OP_NEGATE && x->kind != SP_OP_EXPONENTIAL &&
            x->kind != SP_OP_TANH && x->kind != SP_OP_ABS && x->kind != SP_OP_SQRT &&
            x->kind != SP_OP_RSQRT && x->kind != SP_OP_LOG && x->kind != SP_OP_LOGISTIC) {
            st = ex_local_error(p, x, err, "no kernel for this element type");
            break;
        }
        for (size_t i = 0; i < O->lcount; i++) {
            elem_store(out, O->elem, i, unary(x->kind, elem_load(a, ie, i)));
        }
        break;
    }
    case SP_OP_IS_FINITE: {
        uint32_t v = o->operands[0];
        const void *a = view_as(p, bufs, dev, v, r, &tmp[0]);
        if (a == NULL) {
            st = cm_error_oom(err);
            break;
        }
        if (O->elem != SP_ELEM_I1 || !ex_kern_is_finite(p->vi[v].elem, a, out, O->lcount)) {
            st = ex_local_error(p, x, err, "no kernel for this element type");
        }
        break;
    }
    case SP_OP_CLAMP: { /* clamp(min, operand, max); min and max may be scalars */
        uint32_t vl = o->operands[0], vh = o->operands[2];
        const void *lo = view_as(p, bufs, dev, vl, r, &tmp[0]);
        const void *a = view_as(p, bufs, dev, o->operands[1], r, &tmp[1]);
        const void *hi = view_as(p, bufs, dev, vh, r, &tmp[2]);
        if (lo == NULL || a == NULL || hi == NULL) {
            st = cm_error_oom(err);
            break;
        }
        if (p->vi[vl].elem != O->elem || p->vi[vh].elem != O->elem ||
            !ex_kern_clamp(O->elem, lo, p->vi[vl].rank == 0, a, hi, p->vi[vh].rank == 0, out,
                           O->lcount)) {
            st = ex_local_error(p, x, err, "no kernel for this element type");
        }
        break;
    }
    case SP_OP_COMPARE: {
        uint32_t v0 = o->operands[0], v1 = o->operands[1];
        const void *a = view_as(p, bufs, dev, v0, r, &tmp[0]);
        const void *b = view_as(p, bufs, dev, v1, r, &tmp[1]);
        if (a == NULL || b == NULL) {
            st = cm_error_oom(err);
            break;
        }
        sp_elem ie = p->vi[v0].elem;
        if (O->elem == SP_ELEM_I1 && x->nd == 1) { /* TOTALORDER */
            if (!ex_kern_compare_total(x->fn, ie, a, b, out, O->lcount)) {
                st = ex_local_error(p, x, err, "no kernel for this element type");
            }
            break;
        }
        elem_job j = {.what = EK_COMPARE, .dir = x->fn, .ie = ie, .oe = O->elem, .a = a, .b = b,
                      .out = out, .sa = p->vi[v0].esz, .sb = p->vi[v0].esz, .so = O->esz,
                      .n = O->lcount};
        if (run_elem(p, dev, &j)) {
            break;
        }
        for (size_t i = 0; i < O->lcount; i++) {
            double u = elem_load(a, ie, i), w = elem_load(b, ie, i);
            bool c = x->fn == CMP_EQ   ? u == w
                     : x->fn == CMP_NE ? u != w
                     : x->fn == CMP_LT ? u < w
                     : x->fn == CMP_LE ? u <= w
                     : x->fn == CMP_GT ? u > w
                                       : u >= w;
            elem_store(out, O->elem, i, c ? 1 : 0);
        }
        break;
    }
    case SP_OP_SELECT: {
        uint32_t pv = o->operands[0];
        const void *pr = view_as(p, bufs, dev, pv, r, &tmp[0]);
        const void *a = view_as(p, bufs, dev, o->operands[1], r, &tmp[1]);
        const void *b = view_as(p, bufs, dev, o->operands[2], r, &tmp[2]);
        if (pr == NULL || a == NULL || b == NULL) {
            st = cm_error_oom(err);
            break;
        }
        elem_job j = {.what = EK_SELECT, .a = pr, .b = a, .c = b, .out = out,
                      .sa = p->vi[pv].rank == 0 ? 0 : p->vi[pv].esz, .sb = O->esz, .sc = O->esz,
                      .so = O->esz, .n = O->lcount};
        (void)run_elem(p, dev, &j);
        break;
    }
    case SP_OP_CONSTANT:
    case SP_OP_SDY_CONSTANT: {
        if (x->n_cval <= 1) { /* a splat (or an empty tensor) */
            if (x->n_cval == 1) {
                ex_kern_fill(out, O->lcount, x->cval, O->esz);
            }
            break;
        }
        amap map[EX_MAX_RANK];
        const int64_t *off = voff(p, r, dev);
        for (uint32_t k = 0; k < O->rank; k++) {
            map[k] = (amap){(int32_t)k, 1, off[k]};
        }
        gather_affine(pool_of(p, dev), x->cval, O->gdims, O->rank, map, out, O->ldims, O->rank,
                      O->esz);
        break;
    }
    case SP_OP_PARTITION_ID: /* device d is process (d / n_part, d % n_part); inside a */
    case SP_OP_REPLICA_ID: { /* manual computation: one replica, device d is partition d */
        uint32_t id = x->kind == SP_OP_PARTITION_ID ? dev % p->n_part : dev / p->n_part;
        memcpy(out, &id, sizeof id);
        break;
    }
    case SP_OP_IOTA: {
        if (x->dim < 0 || x->dim >= (int64_t)O->rank) {
            st = ex_local_error(p, x, err, "bad iota dimension");
            break;
        }
        int64_t off = voff(p, r, dev)[x->dim];
        if (O->lcount == 0) {
            break;
        }
        int64_t c[EX_MAX_RANK] = {0};
        size_t i = 0;
        do {
            elem_store(out, O->elem, i++, (double)(off + c[x->dim]));
        } while (next_coord(c, O->ldims, O->rank));
        break;
    }
    case SP_OP_BROADCAST_IN_DIM: {
        uint32_t v = o->operands[0];
        const vinfo *I = &p->vi[v];
        if (x->na != I->rank) {
            st = ex_local_error(p, x, err, "broadcast_dimensions do not match the operand");
            break;
        }
        amap map[EX_MAX_RANK];
        for (uint32_t k = 0; k < I->rank; k++) {
            int64_t rd = x->a[k];
            if (I->gdims[k] == 1 && O->gdims[rd] != 1) {
                map[k] = (amap){-1, 0, 0};
            } else {
                map[k] = (amap){(int32_t)rd, 1, voff(p, r, dev)[rd] - voff(p, v, dev)[k]};
            }
        }
        gather_affine(pool_of(p, dev), bufs[v], I->ldims, I->rank, map, out, O->ldims, O->rank,
                      O->esz);
        break;
    }
    case SP_OP_TRANSPOSE: {
        uint32_t v = o->operands[0];
        const vinfo *I = &p->vi[v];
        amap map[EX_MAX_RANK];
        for (uint32_t i = 0; i < O->rank && i < x->na; i++) {
            int64_t k = x->a[i];
            map[k] = (amap){(int32_t)i, 1, voff(p, r, dev)[i] - voff(p, v, dev)[k]};
        }
        gather_affine(pool_of(p, dev), bufs[v], I->ldims, I->rank, map, out, O->ldims, O->rank,
                      O->esz);
        break;
    }
    case SP_OP_SLICE: {
        uint32_t v = o->operands[0];
        const vinfo *I = &p->vi[v];
        if (x->na != I->rank || x->nc != I->rank) {
            st = ex_local_error(p, x, err, "slice attributes do not match the operand");
            break;
        }
        amap map[EX_MAX_RANK];
        for (uint32_t k = 0; k < I->rank; k++) {
            map[k] = (amap){(int32_t)k, x->c[k],
                            x->a[k] + x->c[k] * voff(p, r, dev)[k] - voff(p, v, dev)[k]};
        }
        gather_affine(pool_of(p, dev), bufs[v], I->ldims, I->rank, map, out, O->ldims, O->rank,
                      O->esz);
        break;
    }
    case SP_OP_RESHAPE: {
        uint32_t v = o->operands[0];
        if (x->gather_reshape) {
            /* the operand is whole: each element of the result block at its
             * global row-major place (padding stays zero) */
            const vinfo *I = &p->vi[v];
            const int64_t *ro = voff(p, r, dev);
            int64_t c[EX_MAX_RANK] = {0};
            size_t i = 0;
            memset(out, 0, O->lcount * O->esz);
            if (O->lcount > 0) {
                do {
                    bool valid = true;
                    size_t g = 0;
                    for (uint32_t k = 0; k < O->rank; k++) {
                        valid = valid && ro[k] + c[k] < O->gdims[k];
                        g = g * (size_t)O->gdims[k] + (size_t)(ro[k] + c[k]);
                    }
                    if (valid && g < I->lcount) {
                        memcpy((char *)out + i * O->esz, (const char *)bufs[v] + g * O->esz,
                               O->esz);
                    }
                    i++;
                } while (next_coord(c, O->ldims, O->rank));
            }
            break;
        }
        if (p->vi[v].lcount != O->lcount) {
            st = ex_local_error(p, x, err, "local shards of operand and result differ in size");
            break;
        }
        memcpy(out, bufs[v], O->lcount * O->esz);
        break;
    }
    case SP_OP_PAD:
    case SP_OP_DYNAMIC_SLICE:
    case SP_OP_DYNAMIC_UPDATE_SLICE:
    case SP_OP_GATHER:
    case SP_OP_SCATTER:
    case SP_OP_CONVOLUTION:
    case SP_OP_REDUCE_WINDOW:
    case SP_OP_SELECT_AND_SCATTER:
        st = run_kern_op(p, x, bufs, dev, out, err);
        break;
    case SP_OP_CONCATENATE: {
        int64_t at = 0, zero[EX_MAX_RANK] = {0}, dst[EX_MAX_RANK] = {0};
        if (x->dim < 0 || x->dim >= (int64_t)O->rank) {
            st = ex_local_error(p, x, err, "bad concatenate dimension");
            break;
        }
        for (uint32_t j = 0; j < o->n_operands && st == CM_OK; j++) {
            const vinfo *I = &p->vi[o->operands[j]];
            for (uint32_t k = 0; k < O->rank; k++) {
                if ((int64_t)k != x->dim && I->ldims[k] != O->ldims[k]) {
                    st = ex_local_error(p, x, err, "operand shards do not line up");
                }
            }
            dst[x->dim] = at;
            if (st == CM_OK && at + I->ldims[x->dim] <= O->ldims[x->dim]) {
                ex_box_copy(bufs[o->operands[j]], I->ldims, zero, out, O->ldims, dst, I->ldims,
                         O->rank, O->elem, O->esz, false);
            }
            at += I->ldims[x->dim];
        }
        if (st == CM_OK && at != O->ldims[x->dim]) {
            st = ex_local_error(p, x, err, "operand shards do not add up to the result");
        }
        break;
    }
    default:
        st = ex_op_error(p, x->op, err, "op %s cannot be executed yet", p->m->ops[x->op].name);
        break;
    }
    for (int i = 0; i < 3; i++) {
        cm_free(tmp[i]);
    }
    if (st != CM_OK) {
        cm_free(out);
        return st;
    }
    bufs[r] = out;
    return CM_OK;
}

/* Runs one non-collective op on device dev, holding the core gate (more
 * workers than cores: only as many compute at once as there are cores). */
cm_status ex_local_run(const prog *p, const xop *x, void **bufs, uint32_t dev, cm_error *err,
                           double *waited)
{
    ex_gate *g = p->gate == NULL ? NULL : &p->gate[dev % p->n_gates];
    double t0 = waited != NULL && g != NULL ? cm_now() : 0;
    ex_gate_enter(g);
    if (waited != NULL && g != NULL) {
        *waited += cm_now() - t0; /* not the op's own time (per-op timers) */
    }
    cm_status st = compute_op(p, x, bufs, dev, err);
    ex_gate_leave(g);
    return st;
}
