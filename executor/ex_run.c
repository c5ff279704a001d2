/* SPDX-License-Identifier: Apache-2.0
 * executor: the run (ex_exec.h ex_exec_run, ex_int.h): the worker threads,
 * one per device, pinned or not, and the control flow they walk together
 * (while, case/if, calls, manual computations), then the results assembled
 * from every device's blocks. */
#define _GNU_SOURCE /* sched_getaffinity, cpu_set_t (Linux) */
#include "ex_int.h"

#include <sched.h>

#include <string.h>

#include "ex_blas.h"
#include "ex_interp.h"
#include "ex_mpi_int.h"
#include "ex_thread_int.h"
#include "ex_timing.h"

/* Most CPUs workers are pinned to (ex_exec_opts.affinity); the rest of a
 * larger machine goes unused by a pinned run. */
#define EX_MAX_PINNED 256

/* The CPUs this process may run on (sched_getaffinity), at most
 * EX_MAX_PINNED; false when they cannot be read or there are none. */
static bool allowed_cpus(size_t *cpus, uint32_t *n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    *n = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        return false;
    }
    for (size_t c = 0; c < (size_t)CPU_SETSIZE && *n < EX_MAX_PINNED; c++) {
        if (CPU_ISSET(c, &set)) {
            cpus[(*n)++] = c;
        }
    }
    return *n > 0;
}

/* Whether n_dev workers under a are pinned, onto cpus[0..*n). */
static bool pinned_cpus(ex_affinity a, uint32_t n_dev, size_t *cpus, uint32_t *n)
{
    *n = 0;
    return a != EX_AFFINITY_OFF && allowed_cpus(cpus, n) && (a == EX_AFFINITY_ON || n_dev > *n);
}

bool ex_affinity_pins(ex_affinity a, uint32_t n_dev)
{
    size_t cpus[EX_MAX_PINNED];
    uint32_t n;
    return pinned_cpus(a, n_dev, cpus, &n);
}

/* ---- workers ------------------------------------------------------------------ */

typedef struct worker {
    shared *sh;
    uint32_t dev;
} worker;

/* Ops the workers run together (ex_coll_run), or as a local copy when the
 * value does not move: Shardy's collectives and reshards, and
 * sharding constraints, which move data when the shardings differ. */
static bool runs_as_collective(sp_op_kind k)
{
    return sp_op_is_sdy_collective(k) || k == SP_OP_SDY_SHARDING_CONSTRAINT;
}

/* Drops every buffer of device dev: keep moves them to the spares for the
 * next iteration; otherwise the spares are freed as well. */
static void free_all(shared *sh, uint32_t dev, bool keep)
{
    void **bufs = wbufs(sh, dev);
    const prog *p = sh->p;
    uint32_t nv = p->m->n_values;
    for (uint32_t v = 0; v < nv; v++) {
        /* a while condition's arguments only ever borrow the loop's buffers */
        if (!p->vi[v].is_arg && !p->vi[v].borrowed && bufs[v] != NULL) {
            ex_buf_release(p, bufs, v, keep);
        }
        bufs[v] = NULL;
        if (!keep) {
            cm_free(bufs[nv + v]);
            bufs[nv + v] = NULL;
        }
    }
}

static void run_block(shared *sh, uint32_t dev, uint32_t blk, bool keep);

/* Releases the buffers that die after op x. */
static void release_dead(const prog *p, void **bufs, const xop *x, bool keep)
{
    for (uint32_t j = 0; j < x->n_dead; j++) {
        if (bufs[x->dead[j]] != NULL) {
            ex_buf_release(p, bufs, x->dead[j], keep);
        }
    }
}

/* ---- control flow: running ---------------------------------------------------------
 * Every device walks the same control flow: a while's predicate and a
 * case's index are voted (flow_vote), so the devices take the same branch
 * and the same trip count, and the collectives inside meet at the same
 * barriers; devices that disagree fail the run. Values cross a region or
 * call boundary by flow_pass: a buffer is handed over when the value dies
 * there, copied otherwise, and redistributed between two barriers when the
 * two sides are held with different shardings (a callee's arguments). */

#define FLOW_FAILED INT64_MIN        /* a device had failed before it voted */

#define FLOW_DISAGREE (INT64_MIN + 1) /* the devices voted differently */

/* Every device's value of a control-flow decision: the common value,
 * FLOW_FAILED when a device had failed, FLOW_DISAGREE when the values
 * differ. Votes alternate between two slots per device, so one barrier per
 * vote suffices: a device writes a slot again only after the next vote's
 * barrier, which every device passes after reading this one. */
static int64_t flow_vote(shared *sh, uint32_t dev, int64_t mine)
{
    uint32_t n = sh->p->n_dev;
    if (n == 1) {
        return mine;
    }
    uint32_t par = sh->n_votes[dev]++ & 1u;
    int64_t *slot = &sh->votes[(size_t)par * n];
    slot[dev] = mine;
    pthread_barrier_wait(&sh->bar);
    int64_t agreed = slot[sh->lo];
    for (uint32_t d = sh->lo; d < sh->hi; d++) {
        if (slot[d] == FLOW_FAILED) {
            agreed = FLOW_FAILED;
            break;
        }
        if (slot[d] != agreed) {
            agreed = FLOW_DISAGREE;
        }
    }
    if (sh->dist == NULL) {
        return agreed;
    }
    /* Across processes: the first device here combines every process's
     * decision; the slot of this parity is written again two votes later,
     * after every worker here has read it. */
    if (dev == sh->lo) {
        sh->dvote[par] = sh->dist->ops->vote(sh->dist, agreed);
    }
    pthread_barrier_wait(&sh->bar);
    return sh->dvote[par];
}

/* In a run across processes (ex_mpi_int.h), between two barriers before
 * the workers read other devices' blocks of vals[0..n): device lo copies
 * in the blocks of the other processes' devices, and every worker here
 * waits for it. dist_unmirror, by every worker after the barrier that ends
 * the reading, drops them. No-ops without MPI. */
static void dist_mirror(shared *sh, uint32_t dev, const uint32_t *vals, uint32_t n)
{
    if (sh->dist == NULL) {
        return;
    }
    if (dev == sh->lo && sh->dist->ops->mirror(sh->dist, sh, vals, n, &sh->errs[dev]) != CM_OK) {
        atomic_store(&sh->failed, 1);
    }
    pthread_barrier_wait(&sh->bar);
}

static void dist_unmirror(shared *sh, uint32_t dev)
{
    if (sh->dist != NULL && dev == sh->lo) {
        sh->dist->ops->unmirror(sh->dist, sh);
    }
}

/* Copies into dst, a block of value dv whose first element is at global
 * position d0, what src, a block of value sv at s0, holds of it; lim: the
 * global dims (positions past them are padding). */
static void copy_overlap(const prog *p, const void *src, uint32_t sv, const int64_t *s0, void *dst,
                         uint32_t dv, const int64_t *d0, const int64_t *lim)
{
    const vinfo *S = &p->vi[sv], *D = &p->vi[dv];
    int64_t ext[EX_MAX_RANK], sf[EX_MAX_RANK], df[EX_MAX_RANK];
    for (uint32_t k = 0; k < D->rank; k++) {
        int64_t a = s0[k] > d0[k] ? s0[k] : d0[k];
        int64_t b = s0[k] + S->ldims[k];
        b = d0[k] + D->ldims[k] < b ? d0[k] + D->ldims[k] : b;
        b = lim[k] < b ? lim[k] : b;
        if (b <= a) {
            return;
        }
        ext[k] = b - a;
        sf[k] = a - s0[k];
        df[k] = a - d0[k];
    }
    ex_box_copy(src, S->ldims, sf, dst, D->ldims, df, ext, D->rank, D->elem, D->esz, false);
}

/* Whether a and b are held as the same blocks on every device. */
static bool same_layout(const prog *p, uint32_t a, uint32_t b)
{
    const vinfo *A = &p->vi[a], *B = &p->vi[b];
    return memcmp(A->ldims, B->ldims, sizeof(int64_t) * A->rank) == 0 &&
           memcmp(A->off, B->off, sizeof(int64_t) * A->rank * p->n_dev) == 0;
}

/* Whether v occurs once in vs. */
static bool once_in(const uint32_t *vs, uint32_t n, uint32_t v)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        k += vs[i] == v;
    }
    return k == 1;
}

/* Gives dst + i the value of src[i] (same types) on device dev, for i < n.
 * A source that dies at op at (released after it, not read inside its
 * regions, passed once) hands its buffer over; otherwise dst gets a copy;
 * at NULL: dst borrows src's buffer (a call's arguments, see flow_call).
 * Where src and dst are held with different shardings every device copies
 * its dst block out of the src blocks of all devices between two barriers
 * (the decision depends on the shardings only, so every device takes
 * them). CM_ENOMEM only. */
static cm_status flow_pass(shared *sh, uint32_t dev, const xop *at, const uint32_t *src,
                           uint32_t dst, uint32_t n, bool keep, cm_error *err)
{
    const prog *p = sh->p;
    void **bufs = wbufs(sh, dev);
    bool failed = atomic_load(&sh->failed) != 0;
    bool moves = false;
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = src[i], d = dst + i;
        if (at == NULL) {
            bufs[d] = NULL; /* a borrowed argument (flow_call cleared it) */
        } else if (bufs[d] != NULL) {
            ex_buf_release(p, bufs, d, keep);
        }
        if (!same_layout(p, s, d)) {
            moves = true;
            continue;
        }
        if (failed || bufs[s] == NULL) {
            continue;
        }
        if (at == NULL) {
            bufs[d] = bufs[s];
            continue;
        }
        if (dies_at(at, s) && !p->vi[s].inner_last && once_in(src, n, s)) {
            bufs[d] = bufs[s];
            bufs[s] = NULL;
            continue;
        }
        bufs[d] = ex_buf_alloc(p, bufs, d, false);
        if (bufs[d] == NULL) {
            st = cm_error_oom(err);
            atomic_store(&sh->failed, 1);
            failed = true;
            continue;
        }
        memcpy(bufs[d], bufs[s], p->vi[d].lcount * p->vi[d].esz);
    }
    if (!moves) {
        return st;
    }
    for (uint32_t i = 0; !failed && i < n; i++) {
        if (!same_layout(p, src[i], dst + i)) {
            bufs[dst + i] = ex_buf_alloc(p, bufs, dst + i, true);
            if (bufs[dst + i] == NULL) {
                st = cm_error_oom(err);
                atomic_store(&sh->failed, 1);
                failed = true;
            }
        }
    }
    pthread_barrier_wait(&sh->bar);
    dist_mirror(sh, dev, src, n);
    for (uint32_t i = 0; atomic_load(&sh->failed) == 0 && i < n; i++) {
        uint32_t s = src[i], d = dst + i;
        if (same_layout(p, s, d)) {
            continue;
        }
        /* Every device's block is a block of the same global tensor, so any
         * device that holds an element can supply it. */
        for (uint32_t sd = 0; sd < p->n_dev; sd++) {
            copy_overlap(p, wbufs(sh, sd)[s], s, voff(p, s, sd), bufs[d], d, voff(p, d, dev),
                         p->vi[s].gdims);
        }
    }
    pthread_barrier_wait(&sh->bar);
    dist_unmirror(sh, dev);
    return st;
}

/* The failure of a vote, reported on device dev against op x. */
static cm_status flow_disagree(shared *sh, uint32_t dev, const xop *x, const char *what)
{
    atomic_store(&sh->failed, 1);
    return ex_op_error(sh->p, x->op, &sh->errs[dev],
                    "%s: the devices disagree on %s, so they cannot run the same control flow "
                    "(a value that should be replicated differs between devices)",
                    sh->p->m->ops[x->op].name, what);
}

/* stablehlo.while: the operands become the loop's values (held in the
 * results' buffers); the condition reads them, the body takes them and
 * returns the next ones. */
static cm_status flow_while(shared *sh, uint32_t dev, const xop *x, bool keep)
{
    const prog *p = sh->p;
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    void **bufs = wbufs(sh, dev);
    cm_error *err = &sh->errs[dev];
    const sp_block *cb = &m->blocks[x->sub[0]], *bb = &m->blocks[x->sub[1]];
    const pblock *cp = &p->pbs[x->sub[0]], *bp = &p->pbs[x->sub[1]];
    const xop *cret = &cp->ops[cp->n_ops - 1], *bret = &bp->ops[bp->n_ops - 1];
    uint32_t n = o->n_results, res = o->first_result;
    cm_status st = flow_pass(sh, dev, x, o->operands, res, n, keep, err);
    for (;;) {
        for (uint32_t j = 0; j < n; j++) {
            bufs[cb->first_arg + j] = bufs[res + j];
        }
        run_block(sh, dev, x->sub[0], true);
        uint32_t pv = m->ops[cret->op].operands[0];
        int64_t mine = atomic_load(&sh->failed) != 0 || bufs[pv] == NULL
                           ? FLOW_FAILED
                           : *(const uint8_t *)bufs[pv] != 0;
        release_dead(p, bufs, cret, true);
        for (uint32_t j = 0; j < n; j++) {
            bufs[cb->first_arg + j] = NULL;
        }
        int64_t go = flow_vote(sh, dev, mine);
        if (go == FLOW_DISAGREE) {
            st = flow_disagree(sh, dev, x, "the loop predicate");
        }
        if (go != 1) {
            break;
        }
        for (uint32_t j = 0; j < n; j++) {
            if (bufs[bb->first_arg + j] != NULL) {
                ex_buf_release(p, bufs, bb->first_arg + j, true);
            }
            bufs[bb->first_arg + j] = bufs[res + j];
            bufs[res + j] = NULL;
        }
        run_block(sh, dev, x->sub[1], true);
        cm_status s2 = flow_pass(sh, dev, bret, m->ops[bret->op].operands, res, n, true, err);
        st = st == CM_OK ? s2 : st;
        release_dead(p, bufs, bret, true);
    }
    return st;
}

/* stablehlo.case and stablehlo.if: the voted branch runs and hands its
 * returned values to the results. An index out of range takes the last
 * branch (StableHLO spec); an if's true branch is region 0. */
static cm_status flow_case(shared *sh, uint32_t dev, const xop *x, bool keep)
{
    const prog *p = sh->p;
    const sp_op *o = &p->m->ops[x->op];
    void **bufs = wbufs(sh, dev);
    uint32_t iv = o->operands[0];
    int64_t mine = FLOW_FAILED;
    if (atomic_load(&sh->failed) == 0 && bufs[iv] != NULL) {
        int64_t k = scalar_index(p, bufs, iv);
        if (x->kind == SP_OP_IF) {
            mine = k != 0 ? 0 : 1;
        } else {
            mine = k < 0 || k >= (int64_t)x->n_sub ? (int64_t)x->n_sub - 1 : k;
        }
    }
    int64_t k = flow_vote(sh, dev, mine);
    if (k == FLOW_DISAGREE) {
        return flow_disagree(sh, dev, x, x->kind == SP_OP_IF ? "the predicate" : "the index");
    }
    if (k == FLOW_FAILED) {
        return CM_OK;
    }
    uint32_t blk = x->sub[k];
    const pblock *pb = &p->pbs[blk];
    const xop *ret = &pb->ops[pb->n_ops - 1];
    run_block(sh, dev, blk, keep);
    cm_status st = flow_pass(sh, dev, ret, p->m->ops[ret->op].operands, o->first_result,
                             o->n_results, keep, &sh->errs[dev]);
    release_dead(p, bufs, ret, keep);
    return st;
}

/* func.call: the callee's arguments borrow the operands' buffers (the
 * caller frees them after the call, at their last use), or get their own
 * when the callee holds them with other shardings (freed here after the
 * call); its body runs, and what it returns becomes the results. */
static cm_status flow_call(shared *sh, uint32_t dev, const xop *x, bool keep)
{
    const prog *p = sh->p;
    const sp_op *o = &p->m->ops[x->op];
    const sp_block *b = &p->m->blocks[x->sub[0]];
    const pblock *pb = &p->pbs[x->sub[0]];
    const xop *ret = &pb->ops[pb->n_ops - 1];
    void **bufs = wbufs(sh, dev);
    cm_status st =
        flow_pass(sh, dev, NULL, o->operands, b->first_arg, b->n_args, keep, &sh->errs[dev]);
    run_block(sh, dev, x->sub[0], keep);
    cm_status s2 = flow_pass(sh, dev, ret, p->m->ops[ret->op].operands, o->first_result,
                             o->n_results, keep, &sh->errs[dev]);
    release_dead(p, bufs, ret, keep);
    for (uint32_t i = 0; i < b->n_args; i++) {
        uint32_t a = b->first_arg + i;
        if (bufs[a] != NULL && !same_layout(p, o->operands[i], a)) {
            ex_buf_release(p, bufs, a, keep);
        }
        bufs[a] = NULL;
    }
    return st == CM_OK ? s2 : st;
}

/* Gives every result (or, with args, every body argument) of manual
 * computation x a zeroed buffer on device dev. false: out of memory. */
static bool manual_alloc(shared *sh, uint32_t dev, const xop *x, bool args)
{
    const prog *p = sh->p;
    const sp_op *o = &p->m->ops[x->op];
    void **bufs = wbufs(sh, dev);
    uint32_t first = args ? p->m->blocks[x->sub[0]].first_arg : o->first_result;
    uint32_t n = args ? o->n_operands : o->n_results;
    for (uint32_t i = 0; i < n; i++) {
        if (bufs[first + i] != NULL) {
            ex_buf_release(p, bufs, first + i, true);
        }
        bufs[first + i] = ex_buf_alloc(p, bufs, first + i, true);
        if (bufs[first + i] == NULL) {
            return false;
        }
    }
    return true;
}

/* sdy.manual_computation: the body runs on each manual group's local
 * tensors. Partitioned, every device runs it once for its own group: its
 * arguments are cut out of the operands' blocks of every device (after a
 * barrier: the operands are ready), and each device's result blocks are
 * filled from the first device of every group (between two barriers: the
 * bodies are done, then nobody reads them any more). The reference run
 * (one worker) runs the body for every group in turn. */
static cm_status flow_manual(shared *sh, uint32_t dev, const xop *x, bool keep)
{
    const prog *p = sh->p;
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const manual *mc = x->ext;
    uint32_t arg0 = m->blocks[x->sub[0]].first_arg;
    const pblock *pb = &p->pbs[x->sub[0]];
    const xop *ret = &pb->ops[pb->n_ops - 1];
    const uint32_t *outs = m->ops[ret->op].operands;
    void **bufs = wbufs(sh, dev);
    cm_error *err = &sh->errs[dev];
    static const int64_t zero[EX_MAX_RANK];
    bool ok = true;
    if (p->replicated && mc->spmd) {
        /* StableHLO collectives inside: every device's body must run, in
         * lockstep, which the interpreter does (ex_interp_manual) */
        if (atomic_load(&sh->failed) != 0) {
            return CM_OK;
        }
        if (!manual_alloc(sh, dev, x, false)) {
            atomic_store(&sh->failed, 1);
            return cm_error_oom(err);
        }
        const void *ins[256];
        void *outs_raw[256];
        if (o->n_operands > 256 || o->n_results > 256) {
            atomic_store(&sh->failed, 1);
            return ex_op_error(p, x->op, err, "%s: more than 256 operands or results", o->name);
        }
        for (uint32_t i = 0; i < o->n_operands; i++) {
            ins[i] = bufs[o->operands[i]];
        }
        for (uint32_t j = 0; j < o->n_results; j++) {
            outs_raw[j] = bufs[o->first_result + j];
        }
        cm_status st = ex_interp_manual(m, x->op, ins, outs_raw, err);
        if (st != CM_OK) {
            atomic_store(&sh->failed, 1);
        }
        return st;
    }
    if (p->replicated) {
        ok = atomic_load(&sh->failed) != 0 || manual_alloc(sh, dev, x, false);
        for (uint32_t u = 0; ok && atomic_load(&sh->failed) == 0 && u < mc->n_units; u++) {
            ok = manual_alloc(sh, dev, x, true);
            for (uint32_t i = 0; ok && i < o->n_operands; i++) {
                const vinfo *I = &p->vi[o->operands[i]];
                copy_overlap(p, bufs[o->operands[i]], o->operands[i], zero, bufs[arg0 + i],
                             arg0 + i, &mc->in_off[i][(size_t)u * I->rank], I->gdims);
            }
            if (ok) {
                run_block(sh, dev, x->sub[0], true);
            }
            for (uint32_t j = 0; ok && atomic_load(&sh->failed) == 0 && j < o->n_results; j++) {
                const vinfo *R = &p->vi[o->first_result + j];
                copy_overlap(p, bufs[outs[j]], outs[j], &mc->out_off[j][(size_t)u * R->rank],
                             bufs[o->first_result + j], o->first_result + j, zero, R->gdims);
            }
            release_dead(p, bufs, ret, true);
        }
        if (!ok) {
            atomic_store(&sh->failed, 1);
            return cm_error_oom(err);
        }
        return CM_OK;
    }
    if (atomic_load(&sh->failed) == 0 && !manual_alloc(sh, dev, x, true)) {
        ok = false;
        atomic_store(&sh->failed, 1);
    }
    pthread_barrier_wait(&sh->bar);
    dist_mirror(sh, dev, o->operands, o->n_operands);
    for (uint32_t i = 0; atomic_load(&sh->failed) == 0 && i < o->n_operands; i++) {
        uint32_t v = o->operands[i];
        const int64_t *at = &mc->in_off[i][(size_t)dev * p->vi[v].rank];
        for (uint32_t s = 0; s < p->n_dev; s++) {
            copy_overlap(p, wbufs(sh, s)[v], v, voff(p, v, s), bufs[arg0 + i], arg0 + i, at,
                         p->vi[v].gdims);
        }
    }
    if (sh->dist != NULL) {
        pthread_barrier_wait(&sh->bar); /* every copy is done before the mirrors go */
        dist_unmirror(sh, dev);
    }
    run_block(sh, dev, x->sub[0], keep);
    if (atomic_load(&sh->failed) == 0 && !manual_alloc(sh, dev, x, false)) {
        ok = false;
        atomic_store(&sh->failed, 1);
    }
    pthread_barrier_wait(&sh->bar);
    dist_mirror(sh, dev, outs, o->n_results);
    for (uint32_t j = 0; atomic_load(&sh->failed) == 0 && j < o->n_results; j++) {
        uint32_t r = o->first_result + j;
        for (uint32_t s = 0; s < p->n_dev; s++) {
            if (mc->keep[j][s]) {
                copy_overlap(p, wbufs(sh, s)[outs[j]], outs[j],
                             &mc->out_off[j][(size_t)s * p->vi[r].rank], bufs[r], r,
                             voff(p, r, dev), p->vi[r].gdims);
            }
        }
    }
    pthread_barrier_wait(&sh->bar);
    dist_unmirror(sh, dev);
    release_dead(p, bufs, ret, keep);
    return ok ? CM_OK : cm_error_oom(err);
}

/* Runs op x of a block on device dev: a collective (every device between
 * two barriers), control flow, or a local op. */
static cm_status run_op(shared *sh, uint32_t dev, const xop *x, bool keep)
{
    prog *p = sh->p;
    void **bufs = wbufs(sh, dev);
    cm_error *err = &sh->errs[dev];
    const sp_op *o = &p->m->ops[x->op];
    bool failed = atomic_load(&sh->failed) != 0;
    cm_status st = CM_OK;
    if (x->check) {
        return CM_OK; /* evaluated on the assembled values after the run */
    }
    switch (x->kind) {
    case SP_OP_WHILE:
        return flow_while(sh, dev, x, keep);
    case SP_OP_CASE:
    case SP_OP_IF:
        return flow_case(sh, dev, x, keep);
    case SP_OP_FUNC_CALL:
    case SP_OP_SDY_NAMED_COMPUTATION:
        return flow_call(sh, dev, x, keep);
    case SP_OP_SDY_MANUAL_COMPUTATION:
        return flow_manual(sh, dev, x, keep);
    default:
        break;
    }
    bool spmd = is_spmd_op(x->kind) && x->kind != SP_OP_PARTITION_ID &&
                x->kind != SP_OP_REPLICA_ID;
    if (spmd && !failed) {
        /* StableHLO collectives (manual computation bodies, partitioned run:
         * the reference hands the body to the interpreter): any worker
         * writes any device's results, zeroed first (a collective_permute
         * leaves the devices nobody sends to at zero) */
        for (uint32_t j = 0; j < o->n_results; j++) {
            uint32_t r = o->first_result + j;
            bufs[r] = ex_buf_alloc(p, bufs, r,
                                   x->kind == SP_OP_COLLECTIVE_PERMUTE ||
                                       x->kind == SP_OP_COLLECTIVE_BROADCAST);
            if (bufs[r] == NULL) {
                st = cm_error_oom(err);
                atomic_store(&sh->failed, 1);
                break;
            }
        }
    }
    if ((runs_as_collective(x->kind) && !p->replicated && !x->local) || x->peer_read || spmd) {
        if (!failed && !spmd) {
            /* Any worker writes any device's result (ex_coll_run; a
             * peer_read op: the worker its own). Sums and unpadded copies
             * write every element of it. */
            uint32_t r = o->first_result;
            bool zero = x->kind != SP_OP_SDY_ALL_REDUCE && x->kind != SP_OP_SDY_REDUCE_SCATTER &&
                        !ex_is_unpadded(p, r, dev);
            bufs[r] = ex_buf_alloc(p, bufs, r, zero);
            if (bufs[r] == NULL) {
                st = cm_error_oom(err);
                atomic_store(&sh->failed, 1);
            }
        }
        if (dev == sh->lo) {
            /* Every worker is past the previous collective's last
             * barrier, so nobody takes items from the counter now. */
            atomic_store(&sh->next_item, 0);
        }
        double arrived = sh->trace != NULL ? cm_now() : 0;
        pthread_barrier_wait(&sh->bar);
        if (sh->trace != NULL) {
            ex_trace_wait(sh->trace, dev, cm_now() - arrived); /* waiting for the last peer */
        }
        if (atomic_load(&sh->failed) == 0) {
            st = ex_coll_run(p, x, sh, dev, err);
        } else if (sh->dist != NULL && sh->dist->ops->crosses(sh->dist, x)) {
            /* the other processes still take part: it sends zeros (the
             * others here meet lo's collective all the same, ex_mpi_int.h) */
            if (dev == sh->lo) {
                (void)sh->dist->ops->coll(sh->dist, p, x, sh, dev, err);
            } else {
                sh->dist->ops->help(sh->dist, dev);
            }
        }
        pthread_barrier_wait(&sh->bar);
    } else if (runs_as_collective(x->kind)) {
        if (!failed) {
            uint32_t v = o->operands[0], r = o->first_result;
            void *out = ex_buf_zalloc(p, bufs, r);
            if (out == NULL) {
                st = cm_error_oom(err);
            } else {
                memcpy(out, bufs[v], p->vi[r].lcount * p->vi[r].esz);
                bufs[r] = out;
            }
        }
    } else if (!failed) {
        st = ex_local_run(p, x, bufs, dev, err, sh->timing[dev] ? &sh->waited[dev] : NULL);
    }
    return st;
}

/* Runs block blk on device dev up to its terminator, which the parent op
 * handles; keep: released buffers stay as spares (another run or loop
 * iteration follows). Buffers are released after their last use
 * (collectives are past their second barrier then, so no peer reads them
 * any more). */
static void run_block(shared *sh, uint32_t dev, uint32_t blk, bool keep)
{
    const prog *p = sh->p;
    const pblock *pb = &p->pbs[blk];
    void **bufs = wbufs(sh, dev);
    /* Per-op timers (ex_exec_opts.op_s) count the ops that run no block of
     * their own: a loop's or call's time is that of the ops inside it. */
    double *op_s = sh->timing[dev] ? sh->op_s + (size_t)dev * p->m->n_ops : NULL;
    for (uint32_t i = 0; i + 1u < pb->n_ops; i++) {
        const xop *x = &pb->ops[i];
        bool traced = sh->trace != NULL && x->n_sub == 0 && ex_trace_on(sh->trace, dev);
        double t0 = (op_s != NULL || traced) && x->n_sub == 0 ? cm_now() : 0;
        sh->waited[dev] = 0;
        if (run_op(sh, dev, x, keep) != CM_OK) {
            atomic_store(&sh->failed, 1);
        }
        if (op_s != NULL && x->n_sub == 0) {
            /* Waiting for a core (more workers than cores) is not the op's. */
            op_s[x->op] += cm_now() - t0 - sh->waited[dev];
        }
        if (traced) {
            ex_trace_op(sh->trace, dev, x->op, t0, cm_now());
        }
        release_dead(p, bufs, x, keep);
    }
}

/* One run of main on device dev; keep: another iteration follows. */
static void run_once(shared *sh, uint32_t dev, bool keep, bool timed)
{
    prog *p = sh->p;
    void **bufs = wbufs(sh, dev);
    const sp_block *b = &p->m->blocks[p->block];
    for (uint32_t i = 0; i < b->n_args; i++) {
        bufs[b->first_arg + i] = sh->argbufs[(size_t)dev * sh->n_args + i];
    }
    sh->timing[dev] = timed;
    run_block(sh, dev, p->block, keep);
    const pblock *pb = &p->pbs[p->block];
    release_dead(p, bufs, &pb->ops[pb->n_ops - 1], keep);
}

static void *worker_thread(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    for (uint32_t it = 0; it < sh->iters; it++) {
        if (it > 0) {
            free_all(sh, w->dev, true);
        }
        pthread_barrier_wait(&sh->bar);
        if (sh->dist != NULL) {
            /* every process starts the run together */
            if (w->dev == sh->lo) {
                sh->dist->ops->sync(sh->dist);
            }
            pthread_barrier_wait(&sh->bar);
        }
        sh->started[w->dev] = cm_now();
        if (sh->trace != NULL) {
            ex_trace_run_begin(sh->trace, w->dev, it, sh->started[w->dev]);
        }
        run_once(sh, w->dev, it + 1 < sh->iters, sh->op_s != NULL && it >= sh->op_from);
        pthread_barrier_wait(&sh->bar);
        if (w->dev == sh->lo && sh->iter_s != NULL) {
            /* From the first device to leave the starting barrier: with
             * more workers than cores, device 0 may be woken well after
             * others have begun (every device's start is written before
             * the closing barrier, and none is written again before the
             * next starting one, which waits for device 0). */
            double t0 = sh->started[sh->lo];
            for (uint32_t d = sh->lo + 1u; d < sh->hi; d++) {
                t0 = sh->started[d] < t0 ? sh->started[d] : t0;
            }
            sh->iter_s[it] = cm_now() - t0;
        }
        if (sh->trace != NULL) {
            ex_trace_run_end(sh->trace, w->dev, it, sh->iters); /* progress, from device 0 */
        }
        if (w->dev == sh->lo && sh->between != NULL && it + 1 < sh->iters) {
            sh->between(sh->between_ctx); /* the others wait at the next barrier */
        }
    }
    return NULL;
}

/* ---- running ------------------------------------------------------------------ */

static void seens_free(uint8_t **seens, uint32_t n)
{
    for (uint32_t j = 0; seens != NULL && j < n; j++) {
        cm_free(seens[j]);
    }
    cm_free(seens);
}

/* Takes device dev's block of a global tensor (zero padding). */
static void *take_block(const prog *p, uint32_t v, uint32_t dev, const void *global)
{
    const vinfo *vi = &p->vi[v];
    void *out = ex_buf_zalloc(p, NULL, v);
    if (out == NULL) {
        return NULL;
    }
    const int64_t *off = voff(p, v, dev);
    int64_t ext[EX_MAX_RANK], zero[EX_MAX_RANK] = {0};
    for (uint32_t k = 0; k < vi->rank; k++) {
        ext[k] = valid_len(vi, k, off[k]);
    }
    ex_box_copy(global, vi->gdims, off, out, vi->ldims, zero, ext, vi->rank, vi->elem, vi->esz,
             false);
    return out;
}

cm_status ex_exec_run(const sp_module *m, const ex_exec_opts *o, const ex_tensor *args,
                      uint32_t n_args, ex_tensor **res_out, uint32_t *n_res_out, cm_error *err)
{
    return ex_exec_run_paced(m, o, NULL, NULL, args, n_args, res_out, n_res_out, err);
}

cm_status ex_exec_run_paced(const sp_module *m, const ex_exec_opts *o, void (*between)(void *ctx),
                            void *ctx, const ex_tensor *args, uint32_t n_args, ex_tensor **res_out,
                            uint32_t *n_res_out, cm_error *err)
{
    return ex_exec_run_dist(m, o, NULL, between, ctx, args, n_args, res_out, n_res_out, NULL, err);
}

/* The values a run hands back: main's results, then with checks the
 * operands of main's check ops (cm_alloc; NULL when out of memory). */
static uint32_t *out_values(const prog *p, const sp_op *ret, bool checks, uint32_t *n_out)
{
    uint32_t n = ret->n_operands;
    for (uint32_t c = 0; checks && c < p->n_checks; c++) {
        n += p->m->ops[p->checks[c]].n_operands;
    }
    uint32_t *v = cm_alloc(sizeof(uint32_t) * (n + 1u));
    if (v == NULL) {
        return NULL;
    }
    uint32_t k = 0;
    for (uint32_t j = 0; j < ret->n_operands; j++) {
        v[k++] = ret->operands[j];
    }
    for (uint32_t c = 0; checks && c < p->n_checks; c++) {
        const sp_op *o = &p->m->ops[p->checks[c]];
        for (uint32_t j = 0; j < o->n_operands; j++) {
            v[k++] = o->operands[j];
        }
    }
    *n_out = n;
    return v;
}

/* The results of a per-process main (prog.spmd_main): device d's result j
 * whole, as (*res_out)[d * n_results + j]. */
static cm_status spmd_results(shared *sh, const uint32_t *outv, uint32_t nr, ex_tensor **res_out,
                              uint32_t *n_res_out, cm_error *err)
{
    const prog *p = sh->p;
    uint32_t n = p->n_dev * nr;
    ex_tensor *res = cm_calloc(n + 1u, sizeof(ex_tensor));
    if (res == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        for (uint32_t j = 0; j < nr; j++) {
            uint32_t v = outv[j];
            const vinfo *vi = &p->vi[v];
            ex_tensor *t = &res[(size_t)d * nr + j];
            t->elem = vi->elem;
            t->rank = vi->rank;
            memcpy(t->dims, vi->gdims, sizeof(int64_t) * vi->rank);
            t->n = count_of(vi->gdims, vi->rank);
            t->data = cm_calloc(t->n + 1u, vi->esz);
            if (t->data == NULL) {
                ex_tensors_free(res, n);
                return cm_error_oom(err);
            }
            memcpy(t->data, wbufs(sh, d)[v], t->n * vi->esz);
        }
    }
    *res_out = res;
    *n_res_out = n;
    return CM_OK;
}

cm_status ex_exec_run_dist(const sp_module *m, const ex_exec_opts *o, ex_dist *dist,
                           void (*between)(void *ctx), void *ctx, const ex_tensor *args,
                           uint32_t n_args, ex_tensor **res_out, uint32_t *n_res_out,
                           uint8_t ***seen_out, cm_error *err)
{
    *res_out = NULL;
    *n_res_out = 0;
    if (seen_out != NULL) {
        *seen_out = NULL;
    }
    uint32_t n_dev = o->replicated ? 1 : (o->n_devices > 0 ? o->n_devices : ex_module_devices(m));
    uint32_t iters = o->iters > 0 ? o->iters : 1;
    if (n_dev > 4096) {
        return cm_error_set(err, CM_EINVAL, NULL, "too many devices (%u)", n_dev);
    }
    /* the devices run here: all of them, or this process's share */
    uint32_t lo = dist != NULL ? dist->lo : 0, hi = dist != NULL ? dist->hi : n_dev;
    if (lo >= hi || hi > n_dev) {
        return cm_error_set(err, CM_EINVAL, NULL,
                            "devices %u..%u of this process are not among the run's %u", lo,
                            hi - 1u, n_dev);
    }
    uint32_t n_loc = hi - lo;
    uint32_t *outv = NULL; /* the values assembled: main's results, then checked ones */
    prog p;
    cm_status st = ex_prog_init(&p, m, n_dev, o->replicated, o->partial_inputs, err);
    if (st == CM_OK && dist != NULL && p.spmd_main) {
        st = cm_error_set(err, CM_EINVAL, NULL,
                          "a per-process program (%u replicas x %u partitions, or StableHLO "
                          "collectives outside sdy.manual_computation) cannot run under --mpi "
                          "yet; run it without --mpi",
                          p.n_rep, p.n_part);
        ex_prog_fini(&p);
        return st;
    }
    if (st == CM_OK && dist != NULL) {
        st = dist->ops->prepare(dist, &p, err);
        if (st != CM_OK) {
            ex_prog_fini(&p);
            return st;
        }
    }
    if (st != CM_OK) {
        ex_prog_fini(&p);
        return st;
    }
    const sp_block *b = &m->blocks[p.block];
    if (n_args != b->n_args) {
        if (dist != NULL) {
            dist->ops->release(dist);
        }
        ex_prog_fini(&p);
        return cm_error_set(err, CM_EINVAL, NULL, "main takes %u arguments, %u given", b->n_args,
                            n_args);
    }
    for (uint32_t i = 0; i < n_args; i++) {
        const vinfo *vi = &p.vi[b->first_arg + i];
        bool ok = args[i].elem == vi->elem && args[i].rank == vi->rank;
        for (uint32_t k = 0; ok && k < vi->rank; k++) {
            ok = args[i].dims[k] == vi->gdims[k];
        }
        if (!ok) {
            if (dist != NULL) {
                dist->ops->release(dist);
            }
            ex_prog_fini(&p);
            return cm_error_set(err, CM_EINVAL, NULL, "argument %u does not match main's type",
                                i);
        }
    }
    ex_blas_init();
    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.p = &p;
    atomic_init(&sh.failed, 0);
    atomic_init(&sh.next_item, 0);
    sh.n_args = n_args;
    sh.iters = iters;
    sh.iter_s = o->iter_s;
    sh.op_s = o->op_s;
    sh.op_from = o->op_from;
    sh.trace = o->trace;
    sh.between = between;
    sh.between_ctx = ctx;
    sh.dist = dist;
    sh.lo = lo;
    sh.hi = hi;
    sh.bufs = cm_calloc((size_t)n_dev * 2u * m->n_values + 1u, sizeof(void *));
    sh.argbufs = cm_calloc((size_t)n_dev * n_args + 1u, sizeof(void *));
    sh.errs = cm_calloc(n_dev, sizeof(cm_error));
    sh.scratch = cm_calloc(n_dev, sizeof(void *));
    sh.votes = cm_calloc(2u * (size_t)n_dev, sizeof(int64_t));
    sh.n_votes = cm_calloc(n_dev, sizeof(uint32_t));
    sh.timing = cm_calloc(n_dev, sizeof(bool));
    sh.waited = cm_calloc(n_dev, sizeof(double));
    sh.started = cm_calloc(n_dev, sizeof(double));
    worker *ws = cm_calloc(n_dev, sizeof(worker));
    bool ok = sh.bufs != NULL && sh.argbufs != NULL && sh.errs != NULL && sh.scratch != NULL &&
              sh.votes != NULL && sh.n_votes != NULL && sh.timing != NULL && sh.waited != NULL &&
              sh.started != NULL && ws != NULL;
    for (uint32_t d = lo; ok && d < hi; d++) {
        for (uint32_t i = 0; ok && i < n_args; i++) {
            void *a = take_block(&p, b->first_arg + i, d, args[i].data);
            sh.argbufs[(size_t)d * n_args + i] = a;
            ok = a != NULL;
        }
    }
    if (!ok) {
        st = cm_error_oom(err);
        goto out;
    }
    /* OpenBLAS threads: the cores shared out over the workers (one device:
     * every core in its sgemm); with more workers than cores, the gate lets
     * only as many compute at a time (ex_gate). */
    uint32_t cores = ex_kern_cores(), n_cpu = 0;
    size_t cpus[EX_MAX_PINNED];
    bool pin = pinned_cpus(o->affinity, n_loc, cpus, &n_cpu);
    if (pin) {
        cores = n_cpu; /* a cgroup or taskset may allow fewer than are online */
    }
    ex_blas_set_threads((int)(n_loc < cores ? cores / n_loc : 1u));
    /* One gate for all the cores, or one per pinned CPU for its workers. */
    uint32_t n_gates = pin && n_loc > cores ? cores : 1u;
    ex_gate gates[EX_MAX_PINNED];
    for (uint32_t g = 0; g < n_gates; g++) {
        ex_gate_init(&gates[g], n_gates > 1 ? 1u : (n_loc > cores ? cores : 0u));
    }
    p.gate = gates;
    p.n_gates = n_gates;
    /* With fewer workers than cores, each worker spreads its element-wise
     * loops over its share of them (ex_par); a pool that cannot start
     * leaves that worker on one thread. */
    uint32_t helpers = n_loc < cores ? cores / n_loc - 1u : 0u;
    if (helpers >= EX_PAR_MAX) {
        helpers = EX_PAR_MAX - 1u;
    }
    p.par = helpers > 0 ? cm_calloc(n_dev, sizeof(ex_par *)) : NULL;
    for (uint32_t d = lo; p.par != NULL && d < hi; d++) {
        (void)ex_par_start(helpers, &p.par[d]);
    }
    /* The workers start together or not at all (ex_thread_int.h): they
     * meet at barriers that count every device, so when one cannot be
     * created (the system is out of threads, or refuses a CPU the process
     * was allowed a moment ago) none runs and the run fails. */
    for (uint32_t d = 0; d < n_loc; d++) {
        ws[d].sh = &sh;
        ws[d].dev = lo + d;
    }
    if (pthread_barrier_init(&sh.bar, NULL, n_loc) != 0) {
        st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory (the workers' barrier)");
    } else {
        ex_threads *team = NULL;
        st = ex_threads_start(n_loc, worker_thread, ws, sizeof *ws, pin ? cpus : NULL, n_cpu, &team,
                              err);
        ex_threads_join(team);
        pthread_barrier_destroy(&sh.bar);
    }
    p.gate = NULL;
    for (uint32_t g = 0; g < n_gates; g++) {
        ex_gate_fini(&gates[g]);
    }
    for (uint32_t d = lo; p.par != NULL && d < hi; d++) {
        ex_par_stop(p.par[d]);
    }
    cm_free(p.par);
    p.par = NULL;
    if (st != CM_OK) {
        goto out;
    }
    if (atomic_load(&sh.failed) != 0) {
        for (uint32_t d = lo; d < hi; d++) {
            if (sh.errs[d].code != CM_OK) {
                if (err != NULL && err->code == CM_OK) {
                    *err = sh.errs[d];
                }
                st = sh.errs[d].code;
                break;
            }
        }
        if (st == CM_OK) {
            st = cm_error_set(err, CM_EINTERNAL, NULL, "a worker failed");
        }
        goto out;
    }
    const sp_op *ret = &m->ops[p.ret];
    uint32_t n_out = 0;
    outv = out_values(&p, ret, o->checks, &n_out);
    if (outv == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    if (p.spmd_main) {
        /* A per-process program: each device's own results, device-major. */
        st = spmd_results(&sh, outv, n_out, res_out, n_res_out, err);
        goto out;
    }
    /* Assemble the results from every device's block (here). */
    ex_tensor *res = cm_calloc(n_out + 1u, sizeof(ex_tensor));
    uint8_t **seens = seen_out != NULL ? cm_calloc(n_out + 1u, sizeof(uint8_t *)) : NULL;
    if (res == NULL || (seen_out != NULL && seens == NULL)) {
        cm_free(res);
        cm_free(seens);
        st = cm_error_oom(err);
        goto out;
    }
    for (uint32_t j = 0; j < n_out; j++) {
        uint32_t v = outv[j];
        const vinfo *vi = &p.vi[v];
        res[j].elem = vi->elem;
        res[j].rank = vi->rank;
        memcpy(res[j].dims, vi->gdims, sizeof(int64_t) * vi->rank);
        res[j].n = count_of(vi->gdims, vi->rank);
        res[j].data = cm_calloc(res[j].n + 1u, vi->esz);
        if (res[j].data == NULL) {
            ex_tensors_free(res, n_out);
            seens_free(seens, n_out);
            st = cm_error_oom(err);
            goto out;
        }
        /* Devices holding the same element must agree bit for bit: a
         * collective that sent wrong data to one replica shows up here. */
        uint8_t *seen = cm_calloc(res[j].n + 1u, 1);
        if (seen == NULL) {
            ex_tensors_free(res, n_out);
            seens_free(seens, n_out);
            st = cm_error_oom(err);
            goto out;
        }
        for (uint32_t d = lo; d < hi && st == CM_OK; d++) {
            const int64_t *off = voff(&p, v, d);
            int64_t ext[EX_MAX_RANK], c[EX_MAX_RANK] = {0};
            bool empty = false;
            for (uint32_t k = 0; k < vi->rank; k++) {
                ext[k] = valid_len(vi, k, off[k]);
                empty = empty || ext[k] <= 0;
            }
            if (empty) {
                continue;
            }
            const char *src = wbufs(&sh, d)[v];
            do {
                size_t si = 0, gi = 0;
                for (uint32_t k = 0; k < vi->rank; k++) {
                    si = si * (size_t)vi->ldims[k] + (size_t)c[k];
                    gi = gi * (size_t)vi->gdims[k] + (size_t)(off[k] + c[k]);
                }
                char *dst = (char *)res[j].data + gi * vi->esz;
                if (seen[gi] && memcmp(dst, src + si * vi->esz, vi->esz) != 0) {
                    char where[160];
                    ex_coords_text(&res[j], gi, where, sizeof where);
                    st =
                        cm_error_set(err, CM_EINTERNAL, NULL,
                                     "result %u: replicas disagree at %s (device %u)", j, where, d);
                    break;
                }
                memcpy(dst, src + si * vi->esz, vi->esz);
                seen[gi] = 1;
            } while (next_coord(c, ext, vi->rank));
        }
        if (seens != NULL) {
            seens[j] = seen;
        } else {
            cm_free(seen);
        }
        if (st != CM_OK) {
            ex_tensors_free(res, n_out);
            seens_free(seens, n_out);
            goto out;
        }
    }
    *res_out = res;
    *n_res_out = n_out;
    if (seen_out != NULL) {
        *seen_out = seens;
    }
out:
    cm_free(outv);
    for (uint32_t d = lo; sh.bufs != NULL && d < hi; d++) {
        free_all(&sh, d, false); /* other processes' slots only ever hold mirrors (ex_mpi.c) */
    }
    for (size_t i = 0; sh.argbufs != NULL && i < (size_t)n_dev * n_args; i++) {
        cm_free(sh.argbufs[i]);
    }
    for (uint32_t d = 0; sh.scratch != NULL && d < n_dev; d++) {
        cm_free(sh.scratch[d]);
    }
    cm_free(sh.scratch);
    cm_free(sh.votes);
    cm_free(sh.n_votes);
    cm_free(sh.timing);
    cm_free(sh.waited);
    cm_free(sh.started);
    cm_free(sh.bufs);
    cm_free(sh.argbufs);
    cm_free(sh.errs);
    cm_free(ws);
    if (dist != NULL) {
        dist->ops->release(dist);
    }
    ex_prog_fini(&p);
    return st;
}
