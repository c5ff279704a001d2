/* SPDX-License-Identifier: Apache-2.0
 * executor: the sdy collectives on shared memory (ex_int.h): all-reduce,
 * all-gather, all-slice, all-to-all, reduce-scatter, collective-permute and
 * the reshards that move data, each run by every worker between the
 * collective's two barriers (ex_run.c). */
#include "ex_int.h"

#include <string.h>

#include "ex_interp.h"
#include "ex_mem_int.h"
#include "ex_mpi_int.h"

/* ---- collectives ----------------------------------------------------------------
 * A collective is cut into work items, and every worker takes items from one
 * shared counter between the collective's two barriers (ex_coll_run), whatever
 * device an item writes: the buffers are shared memory. With more workers
 * than cores only the running ones take items, so no core waits for the share
 * of a worker that is not scheduled, and as many threads move memory as there
 * are cores. A redistribution's item is a contiguous range of one device's
 * result block; items go range by range over the devices, so the devices
 * that receive the same source range (an all-gather) copy it while it is
 * still in the cache. An all-to-all on unpadded blocks is cut the other
 * way (scatters): an item is a range of one source block, read once and in
 * order, whose rows go to every member of its group; items go range by
 * range over the sources. An all-reduce's item is a range of one group's
 * elements: it reads the group's inputs once, sums them in registers and
 * writes the sum to every member's result. Collectives that write more than
 * the cache holds use streaming stores (ex_mem_copy). */

#define COLL_ITEM     ((size_t)128 << 10) /* bytes of result per work item */

#define COLL_SCATTER  ((size_t)512 << 10) /* bytes of source per scattering work item */

#define COLL_STREAM   ((size_t)16 << 20)  /* results of this many bytes in all: streaming stores */

#define COLL_MAX_FAST 64 /* inputs of a one-pass sum, members of a scatter (more: generic paths) */

/* How a block is cut into items (cut_block): for each index of the
 * dimensions before k, ranges of `rows` indices of dimension k; each item
 * is a contiguous range of the block of at most `item` bytes (COLL_ITEM of
 * a result block, COLL_SCATTER of a scattered source block; k is the last
 * dimension when one index of it alone is larger). */
typedef struct cut {
    uint32_t k;
    int64_t rows;   /* indices of k per item */
    int64_t per_k;  /* items along k */
    size_t inner;   /* elements per index of k */
    size_t n_items; /* per device */
} cut;

static void cut_block(const vinfo *O, size_t item, cut *c)
{
    memset(c, 0, sizeof *c);
    c->rows = 1;
    c->per_k = 1;
    c->inner = 1;
    if (O->rank == 0) {
        c->n_items = 1;
        return;
    }
    if (O->lcount == 0) {
        return;
    }
    uint32_t k = O->rank - 1;
    size_t inner = 1;
    while (k > 0 && inner * (size_t)O->ldims[k] * O->esz <= item) {
        inner *= (size_t)O->ldims[k];
        k--;
    }
    int64_t rows = (int64_t)(item / (inner * O->esz));
    rows = rows < 1 ? 1 : (rows > O->ldims[k] ? O->ldims[k] : rows);
    c->k = k;
    c->rows = rows;
    c->per_k = (O->ldims[k] + rows - 1) / rows;
    c->inner = inner;
    c->n_items = (size_t)c->per_k * (count_of(O->ldims, k));
}

/* The devices whose blocks of v device dev's block of r is made from. */
typedef struct srcs {
    uint32_t n;
    uint32_t dev;
    bool self; /* its own block covers the target: a local copy */
    bool wide; /* padded blocks: any device may hold what it needs */
    const int64_t *grp;
} srcs;

static void coll_sources(const prog *p, const xop *x, uint32_t dev, uint32_t v, uint32_t r,
                         bool reduce, srcs *s)
{
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const int64_t *doff = voff(p, r, dev), *soff = voff(p, v, dev);
    /* Without a reduction, a device whose own block covers the target copies
     * locally (all_slice, and no-op reshards). */
    s->dev = dev;
    s->self = !reduce;
    for (uint32_t k = 0; s->self && k < O->rank; k++) {
        int64_t dl = valid_len(O, k, doff[k]);
        s->self = soff[k] <= doff[k] && doff[k] + dl <= soff[k] + valid_len(I, k, soff[k]);
    }
    /* With padded blocks (a dimension the shard count does not divide) the
     * blocks of a group need not tile the target: gathering "x" out of
     * [{"y", "x"}] on y=3, x=2 turns 7 rows in blocks of 2 into blocks of
     * 3, and row 3 sits outside device (y=1)'s group. Every device's block
     * is a block of the same global tensor, so a copy may read any device. */
    s->wide = false;
    for (uint32_t d = 0; !reduce && !s->self && !s->wide && d < p->n_dev; d++) {
        s->wide = !ex_is_unpadded(p, v, d) || !ex_is_unpadded(p, r, d);
    }
    s->grp = &x->groups[(size_t)x->grp_of[dev] * x->gsize];
    s->n = s->self ? 1 : s->wide ? p->n_dev : x->gsize;
}

static uint32_t src_dev(const srcs *s, uint32_t j)
{
    return s->self ? s->dev : s->wide ? j : (uint32_t)s->grp[j];
}

/* Trailing dimensions that a box of extent ext covers whole in buffers of
 * dims a and b form one contiguous run: returns the number of leading
 * dimensions left to iterate and the run length in elements. */
static uint32_t box_runs(const int64_t *ext, const int64_t *a, const int64_t *b, uint32_t rank,
                         size_t *run)
{
    uint32_t m = rank - 1;
    *run = (size_t)ext[m];
    while (m > 0 && ext[m] == a[m] && ext[m] == b[m]) {
        m--;
        *run *= (size_t)ext[m];
    }
    return m;
}

static size_t box_index(const int64_t *dims, const int64_t *from, const int64_t *c, uint32_t rank)
{
    size_t i = 0;
    for (uint32_t k = 0; k < rank; k++) {
        i = i * (size_t)dims[k] + (size_t)(from[k] + c[k]);
    }
    return i;
}

/* Copies the box of extent ext at so in src (dims sd) to do_ in each of
 * dst[0..n_dst) (dims dd, n_dst <= EX_MEM_FAN_MAX), one ex_mem_fan per
 * contiguous run: each run of src is read once for all destinations. */
static void fan_box(const char *src, const int64_t *sd, const int64_t *so, char *const *dst,
                    uint32_t n_dst, const int64_t *dd, const int64_t *do_, const int64_t *ext,
                    uint32_t rank, size_t esz, bool stream)
{
    for (uint32_t k = 0; k < rank; k++) {
        if (ext[k] <= 0) {
            return;
        }
    }
    if (rank == 0) {
        for (uint32_t j = 0; j < n_dst; j++) {
            memcpy(dst[j], src, esz);
        }
        return;
    }
    size_t run = 0;
    uint32_t m = box_runs(ext, sd, dd, rank, &run);
    int64_t c[EX_MAX_RANK] = {0};
    char *at[EX_MEM_FAN_MAX];
    do {
        size_t o = box_index(dd, do_, c, rank) * esz;
        for (uint32_t j = 0; j < n_dst; j++) {
            at[j] = dst[j] + o;
        }
        ex_mem_fan(at, n_dst, src + box_index(sd, so, c, rank) * esz, run * esz, stream);
    } while (next_coord(c, ext, m));
}

/* Copies the box of extent ext at so in src (dims sd) to do_ in dst (dims
 * dd), one ex_mem_copy per contiguous run. */
static void move_box(const char *src, const int64_t *sd, const int64_t *so, char *dst,
                     const int64_t *dd, const int64_t *do_, const int64_t *ext, uint32_t rank,
                     size_t esz, bool stream)
{
    fan_box(src, sd, so, &dst, 1, dd, do_, ext, rank, esz, stream);
}

/* The intersection of source s's block of v with the region [lo, hi) of
 * device dev's block of r (local coordinates of r): its extent and where it
 * starts in the source block and in dev's block. false when empty. */
static bool coll_box(const prog *p, uint32_t v, uint32_t r, uint32_t s, uint32_t dev,
                     const int64_t *lo, const int64_t *hi, int64_t *ext, int64_t *sfrom,
                     int64_t *dfrom)
{
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const int64_t *so = voff(p, v, s), *doff = voff(p, r, dev);
    bool empty = false;
    for (uint32_t k = 0; k < O->rank; k++) {
        int64_t dl = valid_len(O, k, doff[k]);
        int64_t d_beg = doff[k] + lo[k], d_end = doff[k] + (hi[k] < dl ? hi[k] : dl);
        int64_t a = so[k] > d_beg ? so[k] : d_beg;
        int64_t s_end = so[k] + valid_len(I, k, so[k]);
        int64_t b = s_end < d_end ? s_end : d_end;
        ext[k] = b - a;
        empty = empty || ext[k] <= 0;
        sfrom[k] = a - so[k];
        dfrom[k] = a - doff[k];
    }
    return !empty;
}

/* One item of a redistribution: the region [lo, hi) of device dev's block
 * of r, elements [start, start + count) of the block. A reduce sums the
 * group's blocks in group order: in one pass (ex_mem_sum_f32) when every
 * member covers the whole region, else into the worker's scratch buffer
 * (zeroed, then each member added), which is then copied out. */
static cm_status redistribute_item(const prog *p, const xop *x, shared *sh, uint32_t me,
                                   uint32_t dev, const int64_t *lo, const int64_t *hi,
                                   size_t start, size_t count, bool reduce, bool stream,
                                   cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    char *out = wbufs(sh, dev)[r];
    srcs s;
    coll_sources(p, x, dev, v, r, reduce, &s);
    int64_t ext[EX_MAX_RANK], sfrom[EX_MAX_RANK], dfrom[EX_MAX_RANK];
    if (!reduce) {
        for (uint32_t j = 0; j < s.n; j++) {
            uint32_t sd = src_dev(&s, j);
            if (coll_box(p, v, r, sd, dev, lo, hi, ext, sfrom, dfrom)) {
                move_box(wbufs(sh, sd)[v], I->ldims, sfrom, out, O->ldims, dfrom, ext, O->rank,
                         O->esz, stream);
            }
        }
        return CM_OK;
    }
    /* One pass when every member's block covers the whole region. */
    bool fast = O->elem == SP_ELEM_F32 && O->rank > 0 && s.n <= COLL_MAX_FAST;
    const float *in[COLL_MAX_FAST];
    int64_t from[COLL_MAX_FAST][EX_MAX_RANK];
    for (uint32_t j = 0; fast && j < s.n; j++) {
        fast = coll_box(p, v, r, src_dev(&s, j), dev, lo, hi, ext, from[j], dfrom);
        for (uint32_t k = 0; fast && k < O->rank; k++) {
            fast = dfrom[k] == lo[k] && ext[k] == hi[k] - lo[k];
        }
        in[j] = wbufs(sh, src_dev(&s, j))[v];
    }
    if (fast) {
        size_t run = 0;
        uint32_t m = box_runs(ext, I->ldims, O->ldims, O->rank, &run);
        int64_t c[EX_MAX_RANK] = {0};
        const float *at[COLL_MAX_FAST];
        do {
            for (uint32_t j = 0; j < s.n; j++) {
                at[j] = in[j] + box_index(I->ldims, from[j], c, O->rank);
            }
            float *dst = (float *)(void *)out + box_index(O->ldims, lo, c, O->rank);
            ex_mem_sum_f32(&dst, 1, at, s.n, run, stream);
        } while (next_coord(c, ext, m));
        return CM_OK;
    }
    if (sh->scratch[me] == NULL) {
        sh->scratch[me] = cm_alloc(COLL_ITEM + 16u);
        if (sh->scratch[me] == NULL) {
            return cm_error_oom(err);
        }
    }
    char *t = sh->scratch[me];
    int64_t tdims[EX_MAX_RANK], tfrom[EX_MAX_RANK];
    memset(t, 0, count * O->esz);
    for (uint32_t k = 0; k < O->rank; k++) {
        tdims[k] = hi[k] - lo[k];
    }
    for (uint32_t j = 0; j < s.n; j++) {
        uint32_t sd = src_dev(&s, j);
        if (coll_box(p, v, r, sd, dev, lo, hi, ext, sfrom, dfrom)) {
            for (uint32_t k = 0; k < O->rank; k++) {
                tfrom[k] = dfrom[k] - lo[k];
            }
            ex_box_copy(wbufs(sh, sd)[v], I->ldims, sfrom, t, tdims, tfrom, ext, O->rank, O->elem,
                     O->esz, true);
        }
    }
    ex_mem_copy(out + start * O->esz, t, count * O->esz, stream);
    return CM_OK;
}

/* One item of an all-reduce: elements [b, e) of group g. The sum runs in
 * group order, so every member gets the same bits. */
static void all_reduce_item(const prog *p, const xop *x, shared *sh, uint32_t v, uint32_t r,
                            size_t g, size_t b, size_t e, bool stream)
{
    const vinfo *O = &p->vi[r];
    const int64_t *grp = &x->groups[g * x->gsize];
    if (O->elem == SP_ELEM_F32 && x->gsize <= COLL_MAX_FAST && x->fn == RED_ADD) {
        const float *in[COLL_MAX_FAST];
        float *out[COLL_MAX_FAST];
        for (uint32_t j = 0; j < x->gsize; j++) {
            in[j] = (const float *)wbufs(sh, (uint32_t)grp[j])[v] + b;
            out[j] = (float *)wbufs(sh, (uint32_t)grp[j])[r] + b;
        }
        ex_mem_sum_f32(out, x->gsize, in, x->gsize, e - b, stream);
        return;
    }
    /* Other types, larger groups and partials of other kinds (x->fn, the
     * operand's reduction: ex_prepare.c): a block of the combination in the
     * element type itself, in group order (elem_combine: integers wrap). */
    enum { BLOCK = 2048 }; /* elements of up to 8 bytes: 16 KiB, stays in L1 */
    uint64_t words[BLOCK];
    char *acc = (char *)words;
    for (size_t c = b; c < e; c += BLOCK) {
        size_t n = e - c < BLOCK ? e - c : BLOCK;
        memcpy(acc, (const char *)wbufs(sh, (uint32_t)grp[0])[v] + c * O->esz, n * O->esz);
        for (uint32_t j = 1; j < x->gsize; j++) {
            const void *src = wbufs(sh, (uint32_t)grp[j])[v];
            for (size_t i = 0; i < n; i++) {
                elem_combine(acc, i, src, c + i, O->elem, x->fn);
            }
        }
        for (uint32_t j = 0; j < x->gsize; j++) {
            memcpy((char *)wbufs(sh, (uint32_t)grp[j])[r] + c * O->esz, acc, n * O->esz);
        }
    }
}

/* Item piece of a block of B cut as c: the region [lo, hi) (local
 * coordinates of B) and its elements [start, start + count) of the block. */
static void item_region(const vinfo *B, const cut *c, size_t piece, int64_t *lo, int64_t *hi,
                        size_t *start, size_t *count)
{
    size_t outer = piece / (size_t)c->per_k;
    for (uint32_t k = B->rank; k-- > 0;) {
        if (k > c->k) {
            lo[k] = 0;
            hi[k] = B->ldims[k];
        } else if (k == c->k) {
            lo[k] = (int64_t)(piece % (size_t)c->per_k) * c->rows;
            hi[k] = lo[k] + c->rows < B->ldims[k] ? lo[k] + c->rows : B->ldims[k];
        } else {
            lo[k] = (int64_t)(outer % (size_t)B->ldims[k]);
            hi[k] = lo[k] + 1;
            outer /= (size_t)B->ldims[k];
        }
    }
    *start = 0;
    *count = 1;
    if (B->rank > 0) {
        *start = (piece / (size_t)c->per_k * (size_t)B->ldims[c->k] + (size_t)lo[c->k]) * c->inner;
        *count = (size_t)(hi[c->k] - lo[c->k]) * c->inner;
    }
}

/* True when every member of group grp is in that group (the groups
 * partition the devices) and the members' blocks of v are pairwise
 * disjoint. */
static bool group_disjoint(const prog *p, const xop *x, uint32_t v, const int64_t *grp)
{
    const vinfo *I = &p->vi[v];
    for (uint32_t a = 0; a < x->gsize; a++) {
        const int64_t *ao = voff(p, v, (uint32_t)grp[a]);
        if (x->grp_of[grp[a]] != x->grp_of[grp[0]]) {
            return false;
        }
        for (uint32_t b = a + 1; b < x->gsize; b++) {
            const int64_t *bo = voff(p, v, (uint32_t)grp[b]);
            bool meet = true;
            for (uint32_t k = 0; meet && k < I->rank; k++) {
                meet = ao[k] < bo[k] + I->ldims[k] && bo[k] < ao[k] + I->ldims[k];
            }
            if (meet) {
                return false;
            }
        }
    }
    return true;
}

/* True when all-to-all x moves its data source range by source range
 * (scatter_item): no block is padded, no device holds its own target, the
 * groups partition the devices and the blocks of a group's members are
 * disjoint, so every result element is written by exactly one source. Then
 * the devices that read a source are that source's group. */
static bool scatters(const prog *p, const xop *x, uint32_t v, uint32_t r)
{
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    if (x->kind != SP_OP_SDY_ALL_TO_ALL || I->rank != O->rank || O->rank == 0 ||
        x->gsize > COLL_MAX_FAST) {
        return false;
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        srcs s;
        coll_sources(p, x, d, v, r, false, &s);
        if (s.self || s.wide) {
            return false;
        }
        const int64_t *grp = &x->groups[(size_t)x->grp_of[d] * x->gsize];
        if (grp[0] != (int64_t)d) {
            continue; /* each group once, from its first member */
        }
        if (!group_disjoint(p, x, v, grp)) {
            return false;
        }
    }
    return true;
}

/* The intersection of the region [lo, hi) of source sd's block of v (local
 * coordinates of v) with device dev's block of r: its extent and where it
 * starts in both blocks. false when empty. No block is padded (scatters). */
static bool scatter_box(const prog *p, uint32_t v, uint32_t r, uint32_t sd, uint32_t dev,
                        const int64_t *lo, const int64_t *hi, int64_t *ext, int64_t *sfrom,
                        int64_t *dfrom)
{
    const vinfo *O = &p->vi[r];
    const int64_t *so = voff(p, v, sd), *doff = voff(p, r, dev);
    bool empty = false;
    for (uint32_t k = 0; k < O->rank; k++) {
        int64_t a = so[k] + lo[k] > doff[k] ? so[k] + lo[k] : doff[k];
        int64_t e = doff[k] + O->ldims[k];
        int64_t b = so[k] + hi[k] < e ? so[k] + hi[k] : e;
        ext[k] = b - a;
        empty = empty || ext[k] <= 0;
        sfrom[k] = a - so[k];
        dfrom[k] = a - doff[k];
    }
    return !empty;
}

/* True when all-gather x can move its data source range by source range
 * (fan_item): no block is padded, the groups partition the devices, every
 * member of a group has the same result block, and the members' operand
 * blocks tile it (disjoint, inside it, as many elements). Then each result
 * element comes from exactly one source, at the same place in every
 * member's block. */
static bool fans(const prog *p, const xop *x, uint32_t v, uint32_t r)
{
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    if (x->kind != SP_OP_SDY_ALL_GATHER || I->rank != O->rank || O->rank == 0 ||
        x->gsize > EX_MEM_FAN_MAX || x->gsize > COLL_MAX_FAST) {
        return false;
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        if (!ex_is_unpadded(p, v, d) || !ex_is_unpadded(p, r, d)) {
            return false;
        }
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        const int64_t *grp = &x->groups[(size_t)x->grp_of[d] * x->gsize];
        if (grp[0] != (int64_t)d) {
            continue; /* each group once, from its first member */
        }
        if (!group_disjoint(p, x, v, grp)) {
            return false;
        }
        const int64_t *ro = voff(p, r, d);
        size_t covered = 0;
        for (uint32_t a = 0; a < x->gsize; a++) {
            uint32_t da = (uint32_t)grp[a];
            const int64_t *ao = voff(p, v, da), *rao = voff(p, r, da);
            for (uint32_t k = 0; k < O->rank; k++) {
                if (rao[k] != ro[k] || ao[k] < ro[k] ||
                    ao[k] + I->ldims[k] > ro[k] + O->ldims[k]) {
                    return false;
                }
            }
            covered += I->lcount;
        }
        if (covered != O->lcount) {
            return false;
        }
    }
    return true;
}

/* One item of a fanning all-gather (fans): the region [lo, hi) of source
 * sd's block of v, read once and written to every member of sd's group at
 * the same place (fan_box). */
static void fan_item(const prog *p, const xop *x, shared *sh, uint32_t v, uint32_t r, uint32_t sd,
                     const int64_t *lo, const int64_t *hi, bool stream)
{
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const int64_t *grp = &x->groups[(size_t)x->grp_of[sd] * x->gsize];
    int64_t ext[EX_MAX_RANK], sfrom[EX_MAX_RANK], dfrom[EX_MAX_RANK];
    char *dst[EX_MEM_FAN_MAX];
    for (uint32_t j = 0; j < x->gsize; j++) {
        dst[j] = wbufs(sh, (uint32_t)grp[j])[r];
    }
    if (scatter_box(p, v, r, sd, (uint32_t)grp[0], lo, hi, ext, sfrom, dfrom)) {
        fan_box(wbufs(sh, sd)[v], I->ldims, sfrom, dst, x->gsize, O->ldims, dfrom, ext, O->rank,
                O->esz, stream);
    }
}

/* One member's share of a scatter_item: rows [a, b) of the item's cut
 * dimension (source coordinates), each one run of len bytes from s + (t -
 * a) * source row bytes to d + (t - a) * result row bytes. */
typedef struct share {
    const char *s; /* row a's run in the source block */
    char *d;       /* where it goes in the member's result block */
    int64_t a, b;  /* rows of the item this member takes (a == b: none) */
    size_t len;    /* bytes per row */
} share;

/* One item of a scattering all-to-all (scatters): the region [lo, hi) of
 * source sd's block of v, a contiguous range of it, copied to every member
 * of sd's group its intersection with that member's block of r. It goes
 * one index of the cut dimension (a row) at a time, each row to every
 * member in turn, so the source is read once and in order: reading it
 * member by member instead (a run of one member's columns from each row,
 * 16 KiB apart in the benchmark) took 1.7x as long. The rows' runs are
 * found once per item: a move_box call for each 2 KiB run made the
 * benchmark's all-to-all 1.6x slower than these direct copies. */
static void scatter_item(const prog *p, const xop *x, shared *sh, uint32_t v, uint32_t r,
                         uint32_t sd, const cut *c, const int64_t *lo, const int64_t *hi,
                         bool stream)
{
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const int64_t *grp = &x->groups[(size_t)x->grp_of[sd] * x->gsize];
    const char *src = wbufs(sh, sd)[v];
    uint32_t k = c->k;
    int64_t ext[EX_MAX_RANK], sfrom[EX_MAX_RANK], dfrom[EX_MAX_RANK];
    static const int64_t origin[EX_MAX_RANK];
    if (k + 1 == I->rank) {
        /* One index of the last dimension's range: the item is one run. */
        for (uint32_t j = 0; j < x->gsize; j++) {
            uint32_t dev = (uint32_t)grp[j];
            if (scatter_box(p, v, r, sd, dev, lo, hi, ext, sfrom, dfrom)) {
                move_box(src, I->ldims, sfrom, wbufs(sh, dev)[r], O->ldims, dfrom, ext, O->rank,
                         O->esz, stream);
            }
        }
        return;
    }
    share to[COLL_MAX_FAST];
    bool rows_whole = true; /* each member's part of a row is one run */
    size_t srow = c->inner * I->esz, drow = count_of(O->ldims + k + 1, O->rank - k - 1) * O->esz;
    for (uint32_t j = 0; j < x->gsize; j++) {
        uint32_t dev = (uint32_t)grp[j];
        share *m = &to[j];
        m->a = m->b = 0;
        if (!scatter_box(p, v, r, sd, dev, lo, hi, ext, sfrom, dfrom)) {
            continue;
        }
        m->a = sfrom[k];
        m->b = sfrom[k] + ext[k];
        ext[k] = 1;
        size_t run = 0;
        rows_whole = rows_whole && box_runs(ext, I->ldims, O->ldims, O->rank, &run) <= k + 1;
        m->s = src + box_index(I->ldims, sfrom, origin, I->rank) * I->esz;
        m->d = (char *)wbufs(sh, dev)[r] + box_index(O->ldims, dfrom, origin, O->rank) * O->esz;
        m->len = run * O->esz;
    }
    int64_t rlo[EX_MAX_RANK], rhi[EX_MAX_RANK];
    memcpy(rlo, lo, sizeof(int64_t) * I->rank);
    memcpy(rhi, hi, sizeof(int64_t) * I->rank);
    for (int64_t t = lo[k]; t < hi[k]; t++) {
        rlo[k] = t;
        rhi[k] = t + 1;
        for (uint32_t j = 0; j < x->gsize; j++) {
            const share *m = &to[j];
            if (t < m->a || t >= m->b) {
                continue;
            }
            if (rows_whole) {
                size_t i = (size_t)(t - m->a);
                ex_mem_copy(m->d + i * drow, m->s + i * srow, m->len, stream);
            } else {
                uint32_t dev = (uint32_t)grp[j];
                (void)scatter_box(p, v, r, sd, dev, rlo, rhi, ext, sfrom, dfrom);
                move_box(src, I->ldims, sfrom, wbufs(sh, dev)[r], O->ldims, dfrom, ext, O->rank,
                         O->esz, stream);
            }
        }
    }
}

/* Worker me's part of collective x: items from the shared counter
 * (reset before the collective's first barrier) until none is left. Every
 * device's result buffer was allocated before that barrier. */
/* The device holding global position c of v (me when it does, else the
 * last one found, *hint, or the first that does); n_dev when none does. */
static uint32_t holder(const prog *p, uint32_t v, const int64_t *c, uint32_t me, uint32_t *hint)
{
    const vinfo *vi = &p->vi[v];
    for (uint32_t t = 0; t < p->n_dev + 2u; t++) {
        uint32_t d = t == 0 ? me : t == 1 ? *hint : t - 2u;
        const int64_t *off = voff(p, v, d);
        bool in = true;
        for (uint32_t k = 0; in && k < vi->rank; k++) {
            in = c[k] >= off[k] && c[k] < off[k] + valid_len(vi, k, off[k]);
        }
        if (in) {
            *hint = d;
            return d;
        }
    }
    return p->n_dev;
}

/* A slice, pad, dynamic_slice, dynamic_update_slice or reshape whose result
 * block on me needs elements other devices hold (xop.peer_read): each valid
 * element of me's result block is read from a device whose operand block
 * holds its global source position (a reshard of the operand, done element
 * by element: these ops are rare); a pad's element that no source lands on
 * is its padding value, a dynamic_update_slice's element inside the update
 * window is read from the update. Start indices are clamped as the spec
 * says. */
/* Copies the element of v at global position src from the device holding
 * it to dst; false when no device does. */
static bool peer_copy(const prog *p, shared *sh, uint32_t v, const int64_t *src, uint32_t me,
                      uint32_t *hint, char *dst)
{
    const vinfo *V = &p->vi[v];
    uint32_t d = holder(p, v, src, me, hint);
    if (d == p->n_dev) {
        return false;
    }
    const int64_t *so = voff(p, v, d);
    size_t li = 0;
    for (uint32_t k = 0; k < V->rank; k++) {
        li = li * (size_t)V->ldims[k] + (size_t)(src[k] - so[k]);
    }
    memcpy(dst, (const char *)wbufs(sh, d)[v] + li * V->esz, V->esz);
    return true;
}

static cm_status peer_read_run(const prog *p, const xop *x, shared *sh, uint32_t me, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const int64_t *ro = voff(p, r, me);
    char *out = wbufs(sh, me)[r];
    if (O->lcount == 0) {
        return CM_OK;
    }
    if ((x->kind == SP_OP_SLICE || x->kind == SP_OP_PAD) &&
        (x->na != I->rank || x->nc != I->rank || O->rank != I->rank)) {
        return ex_local_error(p, x, err, "slice or pad attributes do not match the operand");
    }
    bool dyn = x->kind == SP_OP_DYNAMIC_SLICE || x->kind == SP_OP_DYNAMIC_UPDATE_SLICE;
    bool dus = x->kind == SP_OP_DYNAMIC_UPDATE_SLICE;
    uint32_t u = dus ? o->operands[1] : v;
    int64_t start[EX_MAX_RANK] = {0};
    if (dyn) {
        uint32_t first = dus ? 2u : 1u;
        if (o->n_operands != first + I->rank || O->rank != I->rank || (!dus && x->na != I->rank) ||
            (dus && p->vi[u].rank != I->rank)) {
            return ex_local_error(p, x, err, "dynamic slice operands do not match the operand");
        }
        for (uint32_t k = 0; k < I->rank; k++) {
            int64_t s = scalar_index(p, wbufs(sh, me), o->operands[first + k]);
            int64_t hi = dus ? O->gdims[k] - p->vi[u].gdims[k] : I->gdims[k] - x->a[k];
            start[k] = s < 0 ? 0 : (s > hi ? hi : s);
        }
    }
    int64_t c[EX_MAX_RANK] = {0}, src[EX_MAX_RANK] = {0};
    uint32_t hint = me, uhint = me;
    size_t i = 0;
    do {
        bool valid = true;
        size_t g = 0;
        for (uint32_t k = 0; k < O->rank; k++) {
            valid = valid && ro[k] + c[k] < O->gdims[k];
            g = g * (size_t)O->gdims[k] + (size_t)(ro[k] + c[k]);
        }
        bool padding = false;
        if (valid && x->kind == SP_OP_PAD) {
            for (uint32_t k = 0; k < I->rank; k++) {
                int64_t t = ro[k] + c[k] - x->a[k], step = x->c[k] + 1;
                padding = padding || t < 0 || t % step != 0 || t / step >= I->gdims[k];
                src[k] = t < 0 ? 0 : t / step;
            }
        }
        bool in_update = dus && valid;
        for (uint32_t k = 0; in_update && k < O->rank; k++) {
            int64_t q = ro[k] + c[k];
            in_update = q >= start[k] && q < start[k] + p->vi[u].gdims[k];
        }
        if (valid && padding) {
            memcpy(out + i * O->esz, wbufs(sh, me)[o->operands[1]], O->esz);
        } else if (in_update) {
            const vinfo *U = &p->vi[u];
            for (uint32_t k = 0; k < U->rank; k++) {
                src[k] = ro[k] + c[k] - start[k];
            }
            if (!peer_copy(p, sh, u, src, me, &uhint, out + i * O->esz)) {
                return ex_local_error(p, x, err, "no device holds an element the result needs");
            }
        } else if (valid) {
            if (dyn) {
                for (uint32_t k = 0; k < I->rank; k++) {
                    src[k] = ro[k] + c[k] + (dus ? 0 : start[k]);
                }
            } else if (x->kind == SP_OP_PAD) {
                /* src is set */
            } else if (x->kind == SP_OP_SLICE) {
                for (uint32_t k = 0; k < I->rank; k++) {
                    src[k] = x->a[k] + x->c[k] * (ro[k] + c[k]);
                }
            } else {
                for (uint32_t k = I->rank; k-- > 0;) {
                    src[k] = I->gdims[k] > 0 ? (int64_t)(g % (size_t)I->gdims[k]) : 0;
                    g = I->gdims[k] > 0 ? g / (size_t)I->gdims[k] : 0;
                }
            }
            if (!peer_copy(p, sh, v, src, me, &hint, out + i * O->esz)) {
                return ex_local_error(p, x, err, "no device holds an element the result needs");
            }
        }
        i++;
    } while (next_coord(c, O->ldims, O->rank));
    return CM_OK;
}

/* ---- StableHLO collectives inside a manual computation (ex_prepare.c) ------------------
 * Every device holds its body values whole (offsets 0), so a collective
 * reads its group members' buffers directly. Items: all_reduce, as the sdy
 * one, a range of one group's elements per operand (all_reduce_item, in
 * group order); all_gather, one source's operand fanned to every member of
 * its group (fan_box, each run read once); reduce_scatter and
 * collective_permute, one device's result; all_to_all, one (device,
 * member) piece. Results were zeroed when the op allocated them
 * (collective_permute leaves devices nobody sends to at zero). */

/* Position of device dev in its group of x. */
static uint32_t spmd_pos(const xop *x, uint32_t dev)
{
    const int64_t *grp = &x->groups[(size_t)x->grp_of[dev] * x->gsize];
    for (uint32_t j = 0; j < x->gsize; j++) {
        if (grp[j] == (int64_t)dev) {
            return j;
        }
    }
    return 0;
}

/* dst (dims dd, box at do_) combined by fn with src's box at so (dims
 * sd) of extent ext, element by element in type e (elem_combine). */
static void combine_box(const char *src, const int64_t *sd, const int64_t *so, char *dst,
                        const int64_t *dd, const int64_t *do_, const int64_t *ext, uint32_t rank,
                        sp_elem e, size_t esz, int fn)
{
    for (uint32_t k = 0; k < rank; k++) {
        if (ext[k] <= 0) {
            return;
        }
    }
    if (rank == 0) {
        elem_combine(dst, 0, src, 0, e, fn);
        return;
    }
    size_t run = 0;
    uint32_t m = box_runs(ext, sd, dd, rank, &run);
    int64_t c[EX_MAX_RANK] = {0};
    do {
        size_t si = box_index(sd, so, c, rank), di = box_index(dd, do_, c, rank);
        for (size_t i = 0; i < run; i++) {
            elem_combine(dst, di + i, src, si + i, e, fn);
        }
    } while (next_coord(c, ext, m));
    (void)esz;
}

/* A body the interpreter evaluates (x->fn RED_BODY, ex_interp_fold), in
 * group order like the built-in combinations. All-reduce: elements [b, e)
 * of group g's result r of operand v, folded into the first member's
 * result and copied to the others. */
static cm_status spmd_fold_all_reduce(const prog *p, const xop *x, shared *sh, uint32_t v,
                                      uint32_t r, size_t g, size_t b, size_t e, cm_error *err)
{
    size_t esz = p->vi[r].esz;
    const int64_t *grp = &x->groups[g * x->gsize];
    char *acc = (char *)wbufs(sh, (uint32_t)grp[0])[r] + b * esz;
    memcpy(acc, (const char *)wbufs(sh, (uint32_t)grp[0])[v] + b * esz, (e - b) * esz);
    for (uint32_t j = 1; j < x->gsize; j++) {
        const char *src = (const char *)wbufs(sh, (uint32_t)grp[j])[v] + b * esz;
        cm_status st = ex_interp_fold(p->m, x->op, acc, src, e - b, err);
        if (st != CM_OK) {
            return st;
        }
    }
    for (uint32_t j = 1; j < x->gsize; j++) {
        memcpy((char *)wbufs(sh, (uint32_t)grp[j])[r] + b * esz, acc, (e - b) * esz);
    }
    return CM_OK;
}

/* Reduce-scatter with such a body: device dev's result j, each member's
 * block copied out whole and folded in. */
static cm_status spmd_fold_reduce_scatter(const prog *p, const xop *x, shared *sh, uint32_t j,
                                          uint32_t dev, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[j], r = o->first_result + j;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const int64_t *grp = &x->groups[(size_t)x->grp_of[dev] * x->gsize];
    int64_t from[EX_MAX_RANK] = {0};
    static const int64_t origin[EX_MAX_RANK];
    from[x->dim] = (int64_t)spmd_pos(x, dev) * O->ldims[x->dim];
    char *out = wbufs(sh, dev)[r];
    if (O->lcount == 0) {
        return CM_OK;
    }
    char *tmp = cm_alloc(O->lcount * O->esz);
    if (tmp == NULL) {
        return cm_error_oom(err);
    }
    move_box(wbufs(sh, (uint32_t)grp[0])[v], I->ldims, from, out, O->ldims, origin, O->ldims,
             O->rank, O->esz, false);
    cm_status st = CM_OK;
    for (uint32_t g = 1; st == CM_OK && g < x->gsize; g++) {
        move_box(wbufs(sh, (uint32_t)grp[g])[v], I->ldims, from, tmp, O->ldims, origin, O->ldims,
                 O->rank, O->esz, false);
        st = ex_interp_fold(p->m, x->op, out, tmp, O->lcount, err);
    }
    cm_free(tmp);
    return st;
}

/* Device dev's result j of reduce_scatter x: its block (its place in the
 * group) of the group's operands, combined in group order. */
static void spmd_reduce_scatter(const prog *p, const xop *x, shared *sh, uint32_t j, uint32_t dev,
                                bool stream)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[j], r = o->first_result + j;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const int64_t *grp = &x->groups[(size_t)x->grp_of[dev] * x->gsize];
    int64_t from[EX_MAX_RANK] = {0};
    static const int64_t origin[EX_MAX_RANK];
    from[x->dim] = (int64_t)spmd_pos(x, dev) * O->ldims[x->dim];
    char *out = wbufs(sh, dev)[r];
    if (O->elem == SP_ELEM_F32 && x->fn == RED_ADD && x->gsize <= COLL_MAX_FAST && O->rank > 0) {
        /* one pass per contiguous run, summed in group order */
        size_t run = 0;
        uint32_t mm = box_runs(O->ldims, I->ldims, O->ldims, O->rank, &run);
        int64_t c[EX_MAX_RANK] = {0};
        const float *at[COLL_MAX_FAST];
        do {
            size_t si = box_index(I->ldims, from, c, O->rank);
            for (uint32_t g = 0; g < x->gsize; g++) {
                at[g] = (const float *)wbufs(sh, (uint32_t)grp[g])[v] + si;
            }
            float *dst = (float *)(void *)out + box_index(O->ldims, origin, c, O->rank);
            ex_mem_sum_f32(&dst, 1, at, x->gsize, run, stream);
        } while (O->lcount > 0 && next_coord(c, O->ldims, mm));
        return;
    }
    move_box(wbufs(sh, (uint32_t)grp[0])[v], I->ldims, from, out, O->ldims, origin, O->ldims,
             O->rank, O->esz, false);
    for (uint32_t g = 1; g < x->gsize; g++) {
        combine_box(wbufs(sh, (uint32_t)grp[g])[v], I->ldims, from, out, O->ldims, origin,
                    O->ldims, O->rank, O->elem, O->esz, x->fn);
    }
}

/* The piece of all_to_all x from the member at place g of device dev's
 * group to dev, result j: block pos(dev) of the member's operand along the
 * split dimension becomes block g of dev's result along the concat one. */
static void spmd_all_to_all(const prog *p, const xop *x, shared *sh, uint32_t j, uint32_t dev,
                            uint32_t g, bool stream)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[j], r = o->first_result + j;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    uint32_t sd = (uint32_t)x->groups[(size_t)x->grp_of[dev] * x->gsize + g];
    int64_t ext[EX_MAX_RANK], so[EX_MAX_RANK] = {0}, do_[EX_MAX_RANK] = {0};
    memcpy(ext, I->ldims, sizeof(int64_t) * I->rank);
    ext[x->dim] = I->ldims[x->dim] / (int64_t)x->gsize;
    so[x->dim] = (int64_t)spmd_pos(x, dev) * ext[x->dim];
    do_[x->cdim] = (int64_t)g * ext[x->cdim];
    move_box(wbufs(sh, sd)[v], I->ldims, so, wbufs(sh, dev)[r], O->ldims, do_, ext, O->rank,
             O->esz, stream);
}

/* Worker me's items of StableHLO collective x. */
static cm_status spmd_coll_run(const prog *p, const xop *x, shared *sh, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t n = p->n_dev, nops = o->n_operands;
    size_t bytes = 0;
    for (uint32_t j = 0; j < nops; j++) {
        const vinfo *O = &p->vi[o->first_result + j];
        bytes += O->lcount * O->esz * n;
    }
    bool stream = bytes >= COLL_STREAM;
    size_t i;
    switch (x->kind) {
    case SP_OP_ALL_REDUCE: {
        size_t ng = n / x->gsize;
        size_t total = 0, per[16];
        size_t chunk[16];
        if (nops > 16) {
            return ex_local_error(p, x, err, "more than 16 operands");
        }
        for (uint32_t j = 0; j < nops; j++) {
            const vinfo *O = &p->vi[o->first_result + j];
            chunk[j] = COLL_ITEM / O->esz;
            per[j] = ng * ((O->lcount + chunk[j] - 1u) / chunk[j]);
            total += per[j];
        }
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < total) {
            uint32_t j = 0;
            size_t k = i;
            while (k >= per[j]) {
                k -= per[j++];
            }
            const vinfo *O = &p->vi[o->first_result + j];
            size_t b = (k / ng) * chunk[j];
            size_t e = b + chunk[j] < O->lcount ? b + chunk[j] : O->lcount;
            if (x->fn == RED_BODY) {
                cm_status st = spmd_fold_all_reduce(p, x, sh, o->operands[j], o->first_result + j,
                                                    k % ng, b, e, err);
                if (st != CM_OK) {
                    return st;
                }
                continue;
            }
            all_reduce_item(p, x, sh, o->operands[j], o->first_result + j, k % ng, b, e, stream);
        }
        break;
    }
    case SP_OP_ALL_GATHER:
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < (size_t)nops * n) {
            uint32_t j = (uint32_t)(i / n), sd = (uint32_t)(i % n);
            uint32_t v = o->operands[j], r = o->first_result + j;
            const vinfo *I = &p->vi[v], *O = &p->vi[r];
            const int64_t *grp = &x->groups[(size_t)x->grp_of[sd] * x->gsize];
            int64_t do_[EX_MAX_RANK] = {0};
            static const int64_t origin[EX_MAX_RANK];
            do_[x->dim] = (int64_t)spmd_pos(x, sd) * I->ldims[x->dim];
            char *dst[EX_MEM_FAN_MAX];
            for (uint32_t g0 = 0; g0 < x->gsize; g0 += EX_MEM_FAN_MAX) {
                uint32_t nd = x->gsize - g0 < EX_MEM_FAN_MAX ? x->gsize - g0 : EX_MEM_FAN_MAX;
                for (uint32_t g = 0; g < nd; g++) {
                    dst[g] = wbufs(sh, (uint32_t)grp[g0 + g])[r];
                }
                fan_box(wbufs(sh, sd)[v], I->ldims, origin, dst, nd, O->ldims, do_, I->ldims,
                        O->rank, O->esz, stream);
            }
        }
        break;
    case SP_OP_REDUCE_SCATTER:
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < (size_t)nops * n) {
            if (x->fn == RED_BODY) {
                cm_status st =
                    spmd_fold_reduce_scatter(p, x, sh, (uint32_t)(i / n), (uint32_t)(i % n), err);
                if (st != CM_OK) {
                    return st;
                }
                continue;
            }
            spmd_reduce_scatter(p, x, sh, (uint32_t)(i / n), (uint32_t)(i % n), stream);
        }
        break;
    case SP_OP_ALL_TO_ALL:
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < (size_t)nops * n * x->gsize) {
            size_t k = i % ((size_t)n * x->gsize);
            spmd_all_to_all(p, x, sh, (uint32_t)(i / ((size_t)n * x->gsize)),
                            (uint32_t)(k / x->gsize), (uint32_t)(k % x->gsize), stream);
        }
        break;
    case SP_OP_COLLECTIVE_PERMUTE:
    case SP_OP_COLLECTIVE_BROADCAST: /* x->groups: each device's source, or -1 */
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < (size_t)nops * n) {
            uint32_t j = (uint32_t)(i / n), d = (uint32_t)(i % n);
            int64_t s = x->groups[d];
            const vinfo *O = &p->vi[o->first_result + j];
            if (s >= 0) {
                ex_mem_copy(wbufs(sh, d)[o->first_result + j],
                            wbufs(sh, (uint32_t)s)[o->operands[j]], O->lcount * O->esz, stream);
            }
        }
        break;
    default:
        return ex_local_error(p, x, err, "not a StableHLO collective");
    }
    ex_mem_fence();
    return CM_OK;
}

cm_status ex_coll_run(const prog *p, const xop *x, shared *sh, uint32_t me, cm_error *err)
{
    if (is_spmd_op(x->kind)) {
        if (sh->dist != NULL) {
            return ex_local_error(p, x, err, "a StableHLO collective across MPI processes "
                                             "cannot be executed yet");
        }
        return spmd_coll_run(p, x, sh, err);
    }
    if (sh->dist != NULL && sh->dist->ops->crosses(sh->dist, x)) {
        /* Across processes (ex_mpi.c): the first worker here moves it all,
         * the others take share of its copies. */
        if (me == sh->lo) {
            return sh->dist->ops->coll(sh->dist, p, x, sh, me, err);
        }
        sh->dist->ops->help(sh->dist, me);
        return CM_OK;
    }
    return ex_coll_local(p, x, sh, me, false, err);
}

cm_status ex_coll_local(const prog *p, const xop *x, shared *sh, uint32_t me, bool dest_only,
                        cm_error *err)
{
    if (x->peer_read) {
        if (!dest_only) {
            return peer_read_run(p, x, sh, me, err);
        }
        cm_status st = CM_OK;
        for (uint32_t d = sh->lo; st == CM_OK && d < sh->hi; d++) {
            st = peer_read_run(p, x, sh, d, err);
        }
        return st;
    }
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *O = &p->vi[r];
    /* Items go over the devices of this process (every device without
     * ex_mpi): the destinations, or the sources whose whole group is here. */
    uint32_t n_loc = sh->hi - sh->lo;
    bool stream = O->lcount * O->esz * n_loc >= COLL_STREAM;
    cm_status st = CM_OK;
    size_t i;
    if (x->kind == SP_OP_SDY_ALL_REDUCE) {
        if (p->vi[v].lcount != O->lcount) {
            return ex_local_error(p, x, err, "operand and result shards differ");
        }
        size_t ng = 0;
        for (uint32_t d = 0; d < p->n_dev; d++) {
            ng = (size_t)x->grp_of[d] + 1u > ng ? (size_t)x->grp_of[d] + 1u : ng;
        }
        size_t chunk = COLL_ITEM / O->esz;
        size_t n_items = ng * ((O->lcount + chunk - 1u) / chunk);
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < n_items) {
            size_t b = (i / ng) * chunk;
            uint32_t first = (uint32_t)x->groups[(i % ng) * x->gsize];
            if (first < sh->lo || first >= sh->hi) {
                continue; /* a group of another process (ex_mpi.c) */
            }
            all_reduce_item(p, x, sh, v, r, i % ng, b,
                            b + chunk < O->lcount ? b + chunk : O->lcount, stream);
        }
        ex_mem_fence();
        return CM_OK;
    }
    bool reduce = x->kind == SP_OP_SDY_REDUCE_SCATTER;
    cut c;
    int64_t lo[EX_MAX_RANK], hi[EX_MAX_RANK];
    size_t start = 0, count = 1;
    if (!dest_only && scatters(p, x, v, r)) {
        /* Items of 512 KiB, round-robin over the sources: 128 KiB items
         * taken source after source made the benchmark's all-to-all 1.25x
         * slower (24-26 against 19.5-20 ms); 32 KiB items 1.8x. */
        cut_block(&p->vi[v], COLL_SCATTER, &c);
        size_t n_items = c.n_items * n_loc;
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < n_items) {
            uint32_t sd = sh->lo + (uint32_t)(i % n_loc);
            item_region(&p->vi[v], &c, i / n_loc, lo, hi, &start, &count);
            scatter_item(p, x, sh, v, r, sd, &c, lo, hi, stream);
        }
        ex_mem_fence();
        return CM_OK;
    }
    if (!dest_only && fans(p, x, v, r)) {
        /* Items of COLL_ITEM bytes of a source, round-robin over the
         * sources. */
        cut_block(&p->vi[v], COLL_ITEM, &c);
        size_t n_items = c.n_items * n_loc;
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < n_items) {
            uint32_t sd = sh->lo + (uint32_t)(i % n_loc);
            item_region(&p->vi[v], &c, i / n_loc, lo, hi, &start, &count);
            fan_item(p, x, sh, v, r, sd, lo, hi, stream);
        }
        ex_mem_fence();
        return CM_OK;
    }
    cut_block(O, COLL_ITEM, &c);
    size_t n_items = c.n_items * n_loc;
    while (st == CM_OK && (i = atomic_fetch_add(&sh->next_item, 1)) < n_items) {
        uint32_t dev = sh->lo + (uint32_t)(i % n_loc);
        item_region(O, &c, i / n_loc, lo, hi, &start, &count);
        st = redistribute_item(p, x, sh, me, dev, lo, hi, start, count, reduce, stream, err);
    }
    ex_mem_fence();
    return st;
}

/* ---- for collectives across processes (ex_mpi_int.h) ----------------------------- */

uint32_t ex_coll_sources(const prog *p, const xop *x, uint32_t dev, bool reduce, uint32_t *src_out)
{
    const sp_op *o = &p->m->ops[x->op];
    srcs s;
    coll_sources(p, x, dev, o->operands[0], o->first_result, reduce, &s);
    for (uint32_t j = 0; j < s.n; j++) {
        src_out[j] = src_dev(&s, j);
    }
    return s.n;
}

bool ex_coll_piece(const prog *p, const xop *x, uint32_t src, uint32_t dev, int64_t *ext,
                   int64_t *sfrom, int64_t *dfrom)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t r = o->first_result;
    static const int64_t origin[EX_MAX_RANK];
    return coll_box(p, o->operands[0], r, src, dev, origin, p->vi[r].ldims, ext, sfrom, dfrom);
}

void ex_coll_move(const void *src, const int64_t *sd, const int64_t *so, void *dst,
                  const int64_t *dd, const int64_t *do_, const int64_t *ext, uint32_t rank,
                  size_t esz)
{
    move_box(src, sd, so, dst, dd, do_, ext, rank, esz, false);
}
