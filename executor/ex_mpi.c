/* SPDX-License-Identifier: Apache-2.0
 * executor: runs across MPI processes (ex_mpi.h), the one file that
 * includes mpi.h. It implements the distribution hooks of ex_mpi_int.h:
 * per collective a plan made once before the workers start (which path,
 * which communicators), the collectives that cross processes, mirrors of
 * other processes' blocks for the rare ops that read any device, votes,
 * and the check that gathers results and timers on process 0.
 * Failures: a process whose run failed still takes part in every MPI call
 * with zeros, so the others never wait forever; an MPI error or a
 * transfer buffer that cannot be had ends the job (MPI_Abort) with a
 * message naming the process.
 * Built without Open MPI (the Makefile defines EX_NO_MPI when pkg-config
 * has no ompi-c, as in the container image's build), the functions say so
 * instead: --mpi fails with that message, nothing else changes. */
#include "ex_mpi.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_json.h"
#include "ex_mpi_int.h"
#include "sp_attrs.h"
#include "sp_cost.h"

void ex_mpi_devices(uint32_t n_dev, uint32_t rank, uint32_t size, uint32_t *lo, uint32_t *hi)
{
    *lo = (uint32_t)((uint64_t)n_dev * rank / size);
    *hi = (uint32_t)((uint64_t)n_dev * (rank + 1u) / size);
}

#ifndef EX_NO_MPI

#include <mpi.h>

struct ex_mpi {
    MPI_Comm world; /* a duplicate of MPI_COMM_WORLD */
    int rank, size;
    MPI_Op fmax, fmin; /* max and min of floats that keep a NaN (elem_combine) */
    char *hosts;       /* size names of EX_MPI_HOST bytes, by rank */
    /* large reductions go round a ring from ring_min bytes on, in
     * ring_chunk-byte messages (RING_MIN, RING_CHUNK; SHARDPLAN_MPI_RING) */
    uint64_t ring_min, ring_chunk;
};

#define EX_MPI_HOST 256

/* ---- process handle ------------------------------------------------------------- */

/* MPI_MAX/MPI_MIN on floats, keeping a NaN as the shared-memory path does. */
static void combine_max(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    sp_elem e = *dt == MPI_DOUBLE ? SP_ELEM_F64 : SP_ELEM_F32;
    for (size_t i = 0; i < (size_t)*len; i++) {
        elem_combine(inout, i, in, i, e, RED_MAX);
    }
}

static void combine_min(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    sp_elem e = *dt == MPI_DOUBLE ? SP_ELEM_F64 : SP_ELEM_F32;
    for (size_t i = 0; i < (size_t)*len; i++) {
        elem_combine(inout, i, in, i, e, RED_MIN);
    }
}

/* Large reductions round a ring (allreduce_big): from RING_MIN bytes, in
 * RING_CHUNK messages. SHARDPLAN_MPI_RING="MIN[,CHUNK]" (bytes; MIN 0 sends
 * every reduction round the ring, as the MPI tests do to check it on small
 * tensors) sets them; process 0's setting holds everywhere, since all
 * processes must take the same path. */
#define RING_MIN   ((uint64_t)1 << 20)
#define RING_CHUNK ((uint64_t)4 << 20)

static void ring_settings(ex_mpi *mp)
{
    uint64_t v[2] = {RING_MIN, RING_CHUNK};
    const char *env = getenv("SHARDPLAN_MPI_RING");
    if (mp->rank == 0 && env != NULL && *env != '\0') {
        char *end = NULL;
        unsigned long long m = strtoull(env, &end, 10);
        unsigned long long c = RING_CHUNK;
        if (end != NULL && *end == ',') {
            c = strtoull(end + 1, &end, 10);
        }
        if (end != NULL && *end == '\0' && c >= 16u && c <= ((uint64_t)1 << 30)) {
            v[0] = m;
            v[1] = c;
        } else {
            fprintf(stderr,
                    "shardplan: SHARDPLAN_MPI_RING=%s is not MIN[,CHUNK] bytes "
                    "(CHUNK 16 B to 1 GiB); the defaults hold\n",
                    env);
        }
    }
    MPI_Bcast(v, 2, MPI_UINT64_T, 0, mp->world);
    mp->ring_min = v[0];
    mp->ring_chunk = v[1];
}

cm_status ex_mpi_init(int *argc, char ***argv, ex_mpi **out, cm_error *err)
{
    *out = NULL;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        return cm_error_set(err, CM_EIO, NULL, "MPI does not start (MPI_Init_thread)");
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return cm_error_set(err, CM_EIO, NULL,
                            "this MPI cannot be called from the worker threads "
                            "(MPI_THREAD_SERIALIZED not provided)");
    }
    ex_mpi *mp = cm_calloc(1, sizeof *mp);
    if (mp == NULL) {
        MPI_Finalize();
        return cm_error_oom(err);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &mp->world);
    MPI_Comm_rank(mp->world, &mp->rank);
    MPI_Comm_size(mp->world, &mp->size);
    MPI_Op_create(combine_max, 1, &mp->fmax);
    MPI_Op_create(combine_min, 1, &mp->fmin);
    char name[MPI_MAX_PROCESSOR_NAME + 1], mine[EX_MPI_HOST];
    int n = 0;
    MPI_Get_processor_name(name, &n);
    name[n < 0 ? 0 : (n > MPI_MAX_PROCESSOR_NAME ? MPI_MAX_PROCESSOR_NAME : n)] = '\0';
    memset(mine, 0, sizeof mine);
    memcpy(mine, name, strlen(name) < sizeof mine - 1u ? strlen(name) : sizeof mine - 1u);
    mp->hosts = cm_calloc((size_t)mp->size, EX_MPI_HOST);
    if (mp->hosts == NULL) {
        ex_mpi_fini(mp);
        return cm_error_oom(err);
    }
    MPI_Allgather(mine, EX_MPI_HOST, MPI_CHAR, mp->hosts, EX_MPI_HOST, MPI_CHAR, mp->world);
    ring_settings(mp);
    *out = mp;
    return CM_OK;
}

void ex_mpi_fini(ex_mpi *mp)
{
    if (mp == NULL) {
        return;
    }
    MPI_Op_free(&mp->fmax);
    MPI_Op_free(&mp->fmin);
    MPI_Comm_free(&mp->world);
    cm_free(mp->hosts);
    cm_free(mp);
    MPI_Finalize();
}

uint32_t ex_mpi_rank(const ex_mpi *mp)
{
    return (uint32_t)mp->rank;
}

uint32_t ex_mpi_size(const ex_mpi *mp)
{
    return (uint32_t)mp->size;
}

const char *ex_mpi_host(const ex_mpi *mp, uint32_t rank)
{
    return rank < (uint32_t)mp->size ? mp->hosts + (size_t)rank * EX_MPI_HOST : "";
}

/* Ends the job: a transfer buffer could not be had, or a size MPI cannot
 * take; the others would wait for this process forever. */
static _Noreturn void die(const ex_mpi *mp, const char *what)
{
    fprintf(stderr, "shardplan: MPI process %d (%s): %s; ending the job\n", mp->rank,
            ex_mpi_host(mp, (uint32_t)mp->rank), what);
    fflush(stderr);
    MPI_Abort(mp->world, 1);
    abort();
}

/* A byte count as MPI's int, or the end of the job. */
static int icount(const ex_mpi *mp, size_t n)
{
    if (n > (size_t)INT_MAX) {
        die(mp, "a transfer of more than 2 GiB in one MPI call");
    }
    return (int)n;
}

static void *xalloc(const ex_mpi *mp, size_t n)
{
    void *b = cm_calloc(n + 1u, 1);
    if (b == NULL) {
        die(mp, "out of memory for a transfer buffer");
    }
    return b;
}

/* Sends or receives n bytes in pieces MPI's int counts take. */
static void send_big(const ex_mpi *mp, const void *b, size_t n, int to)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t at = 0; at < n || at == 0; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        MPI_Send((const char *)b + at, (int)k, MPI_BYTE, to, 7, mp->world);
        if (n == 0) {
            break;
        }
    }
}

static void recv_big(const ex_mpi *mp, void *b, size_t n, int from)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t at = 0; at < n || at == 0; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        MPI_Recv((char *)b + at, (int)k, MPI_BYTE, from, 7, mp->world, MPI_STATUS_IGNORE);
        if (n == 0) {
            break;
        }
    }
}

cm_status ex_mpi_bcast_text(ex_mpi *mp, char **text, size_t *len, cm_error *err)
{
    uint64_t n = mp->rank == 0 ? (uint64_t)*len : 0;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, mp->world);
    int ok = 1;
    if (mp->rank != 0) {
        *text = n < SIZE_MAX ? cm_alloc((size_t)n + 1u) : NULL;
        ok = *text != NULL;
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, mp->world);
    if (!all) {
        if (mp->rank != 0) {
            cm_free(*text);
            *text = NULL;
        }
        return cm_error_oom(err);
    }
    const size_t piece = (size_t)1 << 30;
    for (size_t at = 0; at < (size_t)n; at += piece) {
        size_t k = (size_t)n - at < piece ? (size_t)n - at : piece;
        MPI_Bcast(*text + at, (int)k, MPI_BYTE, 0, mp->world);
    }
    if (mp->rank != 0) {
        (*text)[n] = '\0';
        *len = (size_t)n;
    }
    return CM_OK;
}

cm_status ex_mpi_agree(ex_mpi *mp, cm_status st, cm_error *err)
{
    int mine = st != CM_OK ? mp->rank : mp->size, first = mp->size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, mp->world);
    if (first == mp->size) {
        return CM_OK;
    }
    cm_error e;
    cm_error_clear(&e);
    if (mp->rank == first) {
        if (err != NULL) {
            e = *err;
        }
        if (e.code == CM_OK) {
            e.code = st;
        }
    }
    MPI_Bcast(&e, (int)sizeof e, MPI_BYTE, first, mp->world);
    if (err != NULL) {
        *err = e;
        if (first != 0 && mp->rank != first) {
            /* say where it happened, once */
            char msg[sizeof e.msg + 32];
            snprintf(msg, sizeof msg, "MPI process %d: %s", first, e.msg);
            memcpy(err->msg, msg, sizeof err->msg - 1u);
            err->msg[sizeof err->msg - 1u] = '\0';
        }
    }
    return e.code != CM_OK ? e.code : CM_EINTERNAL;
}

/* ---- plans ------------------------------------------------------------------------
 * Every collective (and every op reading across devices) of the program
 * gets a plan before the workers start, the same on every process: */
enum {
    PL_LOCAL,    /* every device's sources are in its own process: shared memory */
    PL_REDUCE,   /* all-reduce: local reduce, MPI_Allreduce per process set, local copy */
    PL_GATHER,   /* all-gather: MPI_Allgather of the members' blocks, then local copies */
    PL_RSCATTER, /* reduce-scatter: local sum, MPI_Reduce_scatter(_block), local copies */
    PL_A2A,      /* all-to-all: each device's pieces, MPI_Alltoall(v) per process set */
    PL_P2P,      /* permutes, reshards: each piece to its device (MPI_Sendrecv, Isend/Irecv) */
    PL_MIRROR    /* anything else: every device's block everywhere (MPI_Allgatherv) */
};

/* The part of a plan on one communicator: the groups of the collective
 * that span exactly that set of processes and have members here. */
typedef struct sub {
    int set;          /* index into dist.sets */
    uint32_t *groups; /* ascending */
    uint32_t n_groups;
} sub;

typedef struct plan {
    int kind;
    bool disjoint; /* the sets of the collective's groups are pairwise disjoint */
    bool direct;   /* all-gather, reduce-scatter: one MPI call between the devices' buffers
                      (stacked) */
    sub *subs;     /* in the order of dist.sets, which every process shares */
    uint32_t n_subs;
} plan;

/* A set of processes a device group spans and its communicator
 * (MPI_COMM_NULL on processes outside it); cached for the run. */
typedef struct pset {
    uint8_t *in; /* size entries: 1 for a member */
    int n;       /* members */
    int *ranks;  /* ascending world ranks (the communicator's rank order) */
    MPI_Comm comm;
} pset;

typedef struct mirror {
    uint32_t dev, v; /* the slot of another process's device */
    void *buf;       /* owned by the mirror (one per value: the first device's) */
} mirror;

/* Scratch slots: 0-2 the collectives' own, 3-4 the ring's partial sums. */
#define EX_MPI_SCRATCH 5

typedef struct dist {
    ex_dist base;
    ex_mpi *mp;
    const prog *p;
    uint32_t n_dev;
    plan *plans; /* by op id */
    pset *sets;
    uint32_t n_sets, cap_sets;
    mirror *mirs;
    uint32_t n_mirs, cap_mirs;
    double *net_s;             /* by op id, or NULL */
    const char **path;         /* by op id, or NULL: the plan's name */
    int *rank_of;              /* by device: the process running it */
    void *scr[EX_MPI_SCRATCH]; /* transfer buffers kept for the run (scratch) */
    size_t scr_len[EX_MPI_SCRATCH];
    /* The crew: the other workers here, which wait out a collective across
     * processes while device lo makes its MPI calls, take share of its
     * packing and unpacking (crew_run, hook_help). Every worker here meets
     * every such collective once, lo in hook_coll, the others in
     * hook_help, so each counts them alike: collective k is episode k. */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a job posted, an item done, or an episode over */
    bool crew_ok;      /* mu and cv initialised */
    uint64_t lo_ep;    /* episodes device lo has begun */
    uint64_t closed;   /* episodes device lo has ended */
    uint64_t *ep;      /* by device here (index dev - lo): episodes it has joined */
    uint64_t job_ep;   /* the episode of the posted job (0: none) */
    void (*job)(void *ctx, uint32_t item);
    void *job_ctx;
    uint32_t n_items, next, done; /* the job's items: count, next to take, finished */
} dist;

/* Transfer buffer slot of at least n bytes, kept between collectives so
 * the pages are touched once per run (a fresh 64 MiB buffer per
 * collective cost more than the copy into it). Not zeroed. */
static char *scratch(dist *d, int slot, size_t n)
{
    if (d->scr_len[slot] < n || d->scr[slot] == NULL) {
        cm_free(d->scr[slot]);
        d->scr[slot] = xalloc(d->mp, n);
        d->scr_len[slot] = n;
    }
    return d->scr[slot];
}

/* ---- the crew: packing on every worker of the process ----------------------------------
 * Device lo posts a job of n items and takes items itself; the other
 * workers here, in hook_help for the same episode, take items too; lo
 * returns when every item is done. Items are taken under the mutex (they
 * are coarse: one device's pieces), so a worker that arrives late finds
 * none left, never half of another job. Only lo calls MPI (the crew only
 * copies), so MPI_THREAD_SERIALIZED holds. */
static void crew_run(dist *d, void (*fn)(void *ctx, uint32_t item), void *ctx, uint32_t n)
{
    if (!d->crew_ok || d->base.hi - d->base.lo < 2u || n < 2u) {
        for (uint32_t i = 0; i < n; i++) {
            fn(ctx, i);
        }
        return;
    }
    pthread_mutex_lock(&d->mu);
    d->job = fn;
    d->job_ctx = ctx;
    d->n_items = n;
    d->next = 0;
    d->done = 0;
    d->job_ep = d->lo_ep;
    pthread_cond_broadcast(&d->cv);
    while (d->next < d->n_items) {
        uint32_t i = d->next++;
        pthread_mutex_unlock(&d->mu);
        fn(ctx, i);
        pthread_mutex_lock(&d->mu);
        d->done++;
    }
    while (d->done < d->n_items) {
        pthread_cond_wait(&d->cv, &d->mu);
    }
    d->job_ep = 0;
    pthread_mutex_unlock(&d->mu);
}

/* Device me (not lo) during collective episode of its own count: takes
 * items of the jobs lo posts for it until lo ends the episode. */
static void hook_help(ex_dist *base, uint32_t me)
{
    dist *d = (dist *)base;
    if (!d->crew_ok || d->ep == NULL) {
        return;
    }
    pthread_mutex_lock(&d->mu);
    uint64_t k = ++d->ep[me - d->base.lo];
    while (d->closed < k) {
        if (d->job_ep == k && d->next < d->n_items) {
            uint32_t i = d->next++;
            void (*fn)(void *, uint32_t) = d->job;
            void *ctx = d->job_ctx;
            pthread_mutex_unlock(&d->mu);
            fn(ctx, i);
            pthread_mutex_lock(&d->mu);
            if (++d->done == d->n_items) {
                pthread_cond_broadcast(&d->cv);
            }
            continue;
        }
        pthread_cond_wait(&d->cv, &d->mu);
    }
    pthread_mutex_unlock(&d->mu);
}

/* Device lo: the episode of the collective it begins, and its end. */
static void crew_begin(dist *d)
{
    if (d->crew_ok) {
        pthread_mutex_lock(&d->mu);
        d->lo_ep++;
        pthread_mutex_unlock(&d->mu);
    }
}

static void crew_end(dist *d)
{
    if (d->crew_ok) {
        pthread_mutex_lock(&d->mu);
        d->closed = d->lo_ep;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
}

static int rank_of(const dist *d, uint32_t dev)
{
    return d->rank_of[dev];
}

static bool here(const dist *d, uint32_t dev)
{
    return dev >= d->base.lo && dev < d->base.hi;
}

static const int64_t *grp_members(const xop *x, uint32_t g)
{
    return &x->groups[(size_t)g * x->gsize];
}

static uint32_t n_groups(const prog *p, const xop *x)
{
    uint32_t ng = 0;
    for (uint32_t dv = 0; dv < p->n_dev; dv++) {
        ng = (uint32_t)x->grp_of[dv] + 1u > ng ? (uint32_t)x->grp_of[dv] + 1u : ng;
    }
    return ng;
}

/* The set of processes a device group spans, as an index into d->sets
 * (added without a communicator when new); -1 when out of memory. */
static int set_find(dist *d, const uint8_t *in)
{
    int size = d->mp->size;
    for (uint32_t i = 0; i < d->n_sets; i++) {
        if (memcmp(d->sets[i].in, in, (size_t)size) == 0) {
            return (int)i;
        }
    }
    if (d->n_sets == d->cap_sets) {
        uint32_t cap = d->cap_sets ? 2u * d->cap_sets : 8u;
        pset *ns = cm_realloc(d->sets, cap * sizeof *ns);
        if (ns == NULL) {
            return -1;
        }
        d->sets = ns;
        d->cap_sets = cap;
    }
    pset *s = &d->sets[d->n_sets];
    memset(s, 0, sizeof *s);
    s->in = cm_alloc((size_t)size);
    s->ranks = cm_calloc((size_t)size, sizeof(int));
    if (s->in == NULL || s->ranks == NULL) {
        cm_free(s->in);
        cm_free(s->ranks);
        return -1;
    }
    memcpy(s->in, in, (size_t)size);
    for (int r = 0; r < size; r++) {
        if (in[r]) {
            s->ranks[s->n++] = r;
        }
    }
    s->comm = MPI_COMM_NULL;
    return (int)d->n_sets++;
}

/* The communicators of the sets from..n_sets-1 (new ones, of one
 * collective): one MPI_Comm_split over every process when they are
 * disjoint (the usual case: mesh axes across hosts), else one
 * MPI_Comm_create_group per set in order. Same calls on every process. */
static void sets_connect(dist *d, uint32_t from)
{
    int size = d->mp->size;
    bool disjoint = true;
    for (uint32_t i = from; i < d->n_sets && disjoint; i++) {
        for (uint32_t j = i + 1u; j < d->n_sets && disjoint; j++) {
            for (int r = 0; r < size && disjoint; r++) {
                disjoint = !(d->sets[i].in[r] && d->sets[j].in[r]);
            }
        }
    }
    if (disjoint) {
        int color = MPI_UNDEFINED;
        for (uint32_t i = from; i < d->n_sets; i++) {
            if (d->sets[i].in[d->mp->rank]) {
                color = (int)i;
            }
        }
        MPI_Comm c = MPI_COMM_NULL;
        MPI_Comm_split(d->mp->world, color, d->mp->rank, &c);
        if (color != MPI_UNDEFINED) {
            d->sets[color].comm = c;
        }
        return;
    }
    MPI_Group wg;
    MPI_Comm_group(d->mp->world, &wg);
    for (uint32_t i = from; i < d->n_sets; i++) {
        if (!d->sets[i].in[d->mp->rank]) {
            continue;
        }
        MPI_Group g;
        MPI_Group_incl(wg, d->sets[i].n, d->sets[i].ranks, &g);
        MPI_Comm_create_group(d->mp->world, g, (int)i, &d->sets[i].comm);
        MPI_Group_free(&g);
    }
    MPI_Group_free(&wg);
}

/* Whether every device's sources of x are in its own process. */
static bool all_local(const dist *d, const prog *p, const xop *x, uint32_t *buf)
{
    if (x->kind == SP_OP_SDY_ALL_REDUCE) {
        for (uint32_t dv = 0; dv < p->n_dev; dv++) {
            const int64_t *g = grp_members(x, (uint32_t)x->grp_of[dv]);
            for (uint32_t j = 0; j < x->gsize; j++) {
                if (rank_of(d, (uint32_t)g[j]) != rank_of(d, dv)) {
                    return false;
                }
            }
        }
        return true;
    }
    bool reduce = x->kind == SP_OP_SDY_REDUCE_SCATTER;
    for (uint32_t dv = 0; dv < p->n_dev; dv++) {
        uint32_t n = ex_coll_sources(p, x, dv, reduce, buf);
        for (uint32_t j = 0; j < n; j++) {
            if (rank_of(d, buf[j]) != rank_of(d, dv)) {
                return false;
            }
        }
    }
    return true;
}

/* Whether every device's sources are its group's members (no padded
 * blocks that let any device supply any element). */
static bool group_sourced(const prog *p, const xop *x, bool reduce, uint32_t *buf)
{
    for (uint32_t dv = 0; dv < p->n_dev; dv++) {
        uint32_t n = ex_coll_sources(p, x, dv, reduce, buf);
        const int64_t *g = grp_members(x, (uint32_t)x->grp_of[dv]);
        if (n != x->gsize) {
            return false;
        }
        for (uint32_t j = 0; j < n; j++) {
            if (buf[j] != (uint32_t)g[j]) {
                return false;
            }
        }
    }
    return true;
}

/* A reduce-scatter MPI_Reduce_scatter can take: the groups partition the
 * devices, every member of a group holds the same operand block, and
 * each member's result block lies inside it. */
static bool rscatter_fits(const prog *p, const xop *x)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    if (I->rank != O->rank || I->elem != O->elem) {
        return false;
    }
    uint32_t ng = n_groups(p, x);
    for (uint32_t g = 0; g < ng; g++) {
        const int64_t *mem = grp_members(x, g);
        const int64_t *o0 = voff(p, v, (uint32_t)mem[0]);
        for (uint32_t j = 0; j < x->gsize; j++) {
            uint32_t dv = (uint32_t)mem[j];
            if ((uint32_t)x->grp_of[dv] != g ||
                memcmp(voff(p, v, dv), o0, sizeof(int64_t) * I->rank) != 0) {
                return false;
            }
            const int64_t *ro = voff(p, r, dv);
            for (uint32_t k = 0; k < O->rank; k++) {
                if (ro[k] < o0[k] || ro[k] + valid_len(O, k, ro[k]) > o0[k] + I->ldims[k]) {
                    return false;
                }
            }
        }
    }
    return true;
}

/* The subs of plan pl: for each set of processes that some group of x
 * spans (more than this one), the groups with members here. */
static cm_status plan_subs(dist *d, const prog *p, const xop *x, plan *pl, cm_error *err)
{
    int size = d->mp->size;
    uint32_t ng = n_groups(p, x);
    uint8_t *in = cm_alloc((size_t)size);
    int *set_of = cm_calloc(ng + 1u, sizeof(int));
    if (in == NULL || set_of == NULL) {
        cm_free(in);
        cm_free(set_of);
        return cm_error_oom(err);
    }
    uint32_t first_new = d->n_sets;
    for (uint32_t g = 0; g < ng; g++) {
        memset(in, 0, (size_t)size);
        const int64_t *mem = grp_members(x, g);
        for (uint32_t j = 0; j < x->gsize; j++) {
            in[rank_of(d, (uint32_t)mem[j])] = 1;
        }
        set_of[g] = set_find(d, in);
        if (set_of[g] < 0) {
            cm_free(in);
            cm_free(set_of);
            return cm_error_oom(err);
        }
    }
    sets_connect(d, first_new);
    /* whether the sets of this collective are pairwise disjoint (the same
     * answer on every process: it depends on the program only) */
    pl->disjoint = true;
    for (uint32_t a = 0; a < ng && pl->disjoint; a++) {
        for (uint32_t b = 0; b < ng && pl->disjoint; b++) {
            if (set_of[a] == set_of[b]) {
                continue;
            }
            const pset *sa = &d->sets[set_of[a]], *sb = &d->sets[set_of[b]];
            for (int q = 0; q < size && pl->disjoint; q++) {
                pl->disjoint = !(sa->in[q] && sb->in[q]);
            }
        }
    }
    /* subs in set order, then groups ascending */
    pl->subs = cm_calloc(d->n_sets + 1u, sizeof(sub));
    if (pl->subs == NULL) {
        cm_free(in);
        cm_free(set_of);
        return cm_error_oom(err);
    }
    for (uint32_t s = 0; s < d->n_sets; s++) {
        if (!d->sets[s].in[d->mp->rank]) {
            continue;
        }
        sub *u = &pl->subs[pl->n_subs];
        u->set = (int)s;
        for (uint32_t g = 0; g < ng; g++) {
            if (set_of[g] == (int)s) {
                u->n_groups++;
            }
        }
        if (u->n_groups == 0) {
            continue;
        }
        u->groups = cm_calloc(u->n_groups, sizeof(uint32_t));
        if (u->groups == NULL) {
            cm_free(in);
            cm_free(set_of);
            return cm_error_oom(err);
        }
        u->n_groups = 0;
        for (uint32_t g = 0; g < ng; g++) {
            if (set_of[g] == (int)s) {
                u->groups[u->n_groups++] = g;
            }
        }
        pl->n_subs++;
    }
    cm_free(in);
    cm_free(set_of);
    return CM_OK;
}

static bool is_collective(const prog *p, const xop *x)
{
    return ((sp_op_is_sdy_collective(x->kind) || x->kind == SP_OP_SDY_SHARDING_CONSTRAINT) &&
            !p->replicated && !x->local) ||
           x->peer_read;
}

/* Whether every group of the one sub of x has one member on each process
 * of its set, in the communicator's order, whose operand blocks stack
 * along dimension 0 into the result block of every member (gather: an
 * all-gather), or whose result blocks stack so into every member's
 * operand block (a reduce-scatter), unpadded: then one MPI call per group
 * moves the blocks straight between the devices' buffers. It depends on
 * the program and the set only, so the processes of a communicator agree. */
static bool stacked(const dist *d, const prog *p, const xop *x, bool gather)
{
    const plan *pl = &d->plans[x->op];
    if (pl->n_subs != 1 || !pl->disjoint) {
        return false;
    }
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    const pset *ps = &d->sets[pl->subs[0].set];
    if (I->rank == 0 || I->rank != O->rank || ps->n < 2 || x->gsize != (uint32_t)ps->n) {
        return false;
    }
    /* every group of the set: one member per process, stacked in process order */
    const vinfo *big = gather ? O : I, *part = gather ? I : O;
    uint32_t vb = gather ? r : v, vp = gather ? v : r;
    for (uint32_t gi = 0; gi < pl->subs[0].n_groups; gi++) {
        const int64_t *mem = grp_members(x, pl->subs[0].groups[gi]);
        for (uint32_t j = 0; j < x->gsize; j++) {
            uint32_t dj = (uint32_t)mem[j];
            if (rank_of(d, dj) != d->sets[pl->subs[0].set].ranks[j] || !ex_is_unpadded(p, v, dj) ||
                !ex_is_unpadded(p, r, dj) || big->ldims[0] != part->ldims[0] * (int64_t)x->gsize) {
                return false;
            }
            for (uint32_t jj = 0; jj < x->gsize; jj++) {
                /* member jj's piece sits at row jj * rows of member j's big block */
                uint32_t dp = gather ? (uint32_t)mem[jj] : dj, db = gather ? dj : (uint32_t)mem[jj];
                uint32_t at = gather ? jj : j;
                const int64_t *po = voff(p, vp, dp), *bo = voff(p, vb, db);
                if (po[0] != bo[0] + (int64_t)at * part->ldims[0]) {
                    return false;
                }
                for (uint32_t k = 1; k < I->rank; k++) {
                    if (po[k] != bo[k] || part->ldims[k] != big->ldims[k]) {
                        return false;
                    }
                }
            }
        }
    }
    return true;
}

static cm_status plan_make(dist *d, const prog *p, const xop *x, uint32_t *buf, cm_error *err)
{
    plan *pl = &d->plans[x->op];
    if (x->peer_read) {
        pl->kind = d->mp->size > 1 ? PL_MIRROR : PL_LOCAL;
        return CM_OK;
    }
    if (all_local(d, p, x, buf)) {
        pl->kind = PL_LOCAL;
        return CM_OK;
    }
    switch (x->kind) {
    case SP_OP_SDY_ALL_REDUCE:
        pl->kind = PL_REDUCE;
        return plan_subs(d, p, x, pl, err);
    case SP_OP_SDY_ALL_GATHER:
        pl->kind = group_sourced(p, x, false, buf) ? PL_GATHER : PL_MIRROR;
        if (pl->kind == PL_GATHER) {
            cm_status st = plan_subs(d, p, x, pl, err);
            pl->direct = st == CM_OK && stacked(d, p, x, true);
            return st;
        }
        return CM_OK;
    case SP_OP_SDY_REDUCE_SCATTER:
        pl->kind = group_sourced(p, x, true, buf) && rscatter_fits(p, x) ? PL_RSCATTER : PL_MIRROR;
        if (pl->kind == PL_RSCATTER) {
            cm_status st = plan_subs(d, p, x, pl, err);
            pl->direct = st == CM_OK && stacked(d, p, x, false);
            return st;
        }
        return CM_OK;
    case SP_OP_SDY_ALL_TO_ALL:
        if (group_sourced(p, x, false, buf)) {
            pl->kind = PL_A2A;
            cm_status st = plan_subs(d, p, x, pl, err);
            if (st == CM_OK && (!pl->disjoint || pl->n_subs != 1)) {
                /* not one communicator per process */
                pl->kind = PL_P2P;
            }
            return st;
        }
        pl->kind = PL_P2P;
        return CM_OK;
    default:
        pl->kind = PL_P2P;
        return CM_OK;
    }
}

static const char *const plan_names[] = {"shared memory",
                                         "MPI_Allreduce",
                                         "MPI_Allgather",
                                         "MPI_Reduce_scatter",
                                         "MPI_Isend/Irecv all-to-all",
                                         "MPI_Isend/Irecv",
                                         "MPI_Allgatherv (mirror)"};

static void plans_free(dist *d)
{
    if (d->plans == NULL) {
        return;
    }
    for (uint32_t i = 0; i < d->p->m->n_ops; i++) {
        for (uint32_t s = 0; s < d->plans[i].n_subs; s++) {
            cm_free(d->plans[i].subs[s].groups);
        }
        cm_free(d->plans[i].subs);
    }
    cm_free(d->plans);
    d->plans = NULL;
}

static cm_status hook_prepare(ex_dist *base, const prog *p, cm_error *err)
{
    dist *d = (dist *)base;
    d->p = p;
    cm_free(d->rank_of);
    d->rank_of = cm_calloc(p->n_dev + 1u, sizeof(int));
    if (d->rank_of == NULL) {
        return cm_error_oom(err);
    }
    for (int q = 0; q < d->mp->size; q++) {
        uint32_t lo = 0, hi = 0;
        ex_mpi_devices(p->n_dev, (uint32_t)q, (uint32_t)d->mp->size, &lo, &hi);
        for (uint32_t dv = lo; dv < hi; dv++) {
            d->rank_of[dv] = q;
        }
    }
    /* a fresh count of episodes for the workers about to start */
    cm_free(d->ep);
    d->ep = cm_calloc(p->n_dev + 1u, sizeof(uint64_t));
    if (d->ep == NULL) {
        return cm_error_oom(err);
    }
    d->lo_ep = d->closed = d->job_ep = 0;
    d->plans = cm_calloc(p->m->n_ops + 1u, sizeof(plan));
    uint32_t *buf = cm_calloc(p->n_dev + 1u, sizeof(uint32_t));
    if (d->plans == NULL || buf == NULL) {
        cm_free(buf);
        return cm_error_oom(err);
    }
    cm_status st = CM_OK;
    /* block by block, op by op: the same order on every process, so the
     * communicators are made by the same calls everywhere */
    for (uint32_t b = 0; st == CM_OK && b < p->m->n_blocks; b++) {
        const pblock *pb = &p->pbs[b];
        for (uint32_t i = 0; st == CM_OK && pb->ops != NULL && i < pb->n_ops; i++) {
            if (is_collective(p, &pb->ops[i])) {
                st = plan_make(d, p, &pb->ops[i], buf, err);
                if (d->path != NULL) {
                    d->path[pb->ops[i].op] = plan_names[d->plans[pb->ops[i].op].kind];
                }
            }
        }
    }
    cm_free(buf);
    return st;
}

static void hook_release(ex_dist *base)
{
    dist *d = (dist *)base;
    plans_free(d);
    cm_free(d->ep);
    d->ep = NULL;
}

static bool hook_crosses(const ex_dist *base, const xop *x)
{
    const dist *d = (const dist *)base;
    return d->plans != NULL && d->plans[x->op].kind != PL_LOCAL;
}

/* ---- types and reductions ---------------------------------------------------------- */

/* The MPI type and operation combining elements of e by fn (RED_*): sums
 * and products of integers on the unsigned type of the width (they wrap,
 * as elem_combine), booleans as bitwise or/and, float max/min keeping NaN. */
static void mpi_reduction(const ex_mpi *mp, sp_elem e, int fn, MPI_Datatype *t, MPI_Op *op)
{
    bool wrap = fn == RED_ADD || fn == RED_MUL || fn == RED_AND || fn == RED_OR;
    switch (e) {
    case SP_ELEM_F32:
        *t = MPI_FLOAT;
        break;
    case SP_ELEM_F64:
        *t = MPI_DOUBLE;
        break;
    case SP_ELEM_I8:
        *t = wrap ? MPI_UINT8_T : MPI_INT8_T;
        break;
    case SP_ELEM_I16:
        *t = wrap ? MPI_UINT16_T : MPI_INT16_T;
        break;
    case SP_ELEM_I32:
        *t = wrap ? MPI_UINT32_T : MPI_INT32_T;
        break;
    case SP_ELEM_I64:
        *t = wrap ? MPI_UINT64_T : MPI_INT64_T;
        break;
    case SP_ELEM_UI16:
        *t = MPI_UINT16_T;
        break;
    case SP_ELEM_UI32:
        *t = MPI_UINT32_T;
        break;
    case SP_ELEM_UI64:
        *t = MPI_UINT64_T;
        break;
    default: /* ui8, i1 */
        *t = MPI_UINT8_T;
        break;
    }
    bool fl = e == SP_ELEM_F32 || e == SP_ELEM_F64;
    switch (fn) {
    case RED_MAX:
        *op = fl ? mp->fmax : MPI_MAX;
        break;
    case RED_MIN:
        *op = fl ? mp->fmin : MPI_MIN;
        break;
    case RED_MUL:
        *op = e == SP_ELEM_I1 ? MPI_BAND : MPI_PROD;
        break;
    case RED_AND:
        *op = MPI_BAND;
        break;
    case RED_OR:
        *op = MPI_BOR;
        break;
    default:
        *op = e == SP_ELEM_I1 ? MPI_BOR : MPI_SUM;
        break;
    }
}

/* dst[0..n) = the combination by fn of the blocks of v of the members of
 * group g that are here, in group order (elem_combine); false when none
 * is. A failed run combines nothing (dst stays zero). */
static void local_reduce(const dist *d, shared *sh, const xop *x, uint32_t g, uint32_t v, int fn,
                         char *dst, bool failed)
{
    const vinfo *I = &d->p->vi[v];
    const int64_t *mem = grp_members(x, g);
    bool any = false;
    for (uint32_t j = 0; j < x->gsize; j++) {
        uint32_t dv = (uint32_t)mem[j];
        if (!here(d, dv)) {
            continue;
        }
        const void *src = wbufs(sh, dv)[v];
        if (failed || src == NULL) {
            any = true;
            continue;
        }
        if (!any) {
            memcpy(dst, src, I->lcount * I->esz);
        } else if (I->elem == SP_ELEM_F32 && fn == RED_ADD) {
            float *a = (float *)(void *)dst;
            const float *b = src;
            for (size_t i = 0; i < I->lcount; i++) {
                a[i] += b[i];
            }
        } else {
            for (size_t i = 0; i < I->lcount; i++) {
                elem_combine(dst, i, src, i, I->elem, fn);
            }
        }
        any = true;
    }
}

/* ---- large reductions round a ring ----------------------------------------------------
 * Open MPI 4.1's own reduce-scatter and all-reduce over TCP took about three
 * times as long on 64 MiB as a ring made of its point-to-point calls
 * (measured side by side, make bench-mpi): from RING_MIN bytes on, the
 * reductions go round the communicator's ring instead. Each of the n-1 steps
 * sends one block's partial combination to the right in RING_CHUNK
 * messages, all posted at once, and combines each chunk from the left with
 * this process's own block as it arrives (MPI_Reduce_local, the same op), so
 * the wire stays busy while the CPU combines. Every op we reduce with is
 * commutative; each block is combined in one place and then copied, so
 * every process ends with the same bits. */

/* Elements of esz bytes a ring message holds (at least one). */
static size_t ring_per(const ex_mpi *mp, size_t esz)
{
    size_t per = (size_t)mp->ring_chunk / esz;
    return per > 0 ? per : 1u;
}

/* A ring over comm: this process's position and neighbours, the message
 * size in elements, and requests for one step's messages of the largest
 * block. */
typedef struct ring {
    int n, me, left, right;
    size_t per, most;
    MPI_Request *rq;
} ring;

static void ring_open(dist *d, const size_t *counts, size_t esz, MPI_Comm comm, ring *r)
{
    MPI_Comm_size(comm, &r->n);
    MPI_Comm_rank(comm, &r->me);
    r->left = (r->me + r->n - 1) % r->n;
    r->right = (r->me + 1) % r->n;
    r->per = ring_per(d->mp, esz);
    r->most = 0;
    for (int q = 0; q < r->n; q++) {
        r->most = counts[q] > r->most ? counts[q] : r->most;
    }
    r->rq = xalloc(d->mp, 2u * ((r->most + r->per - 1u) / r->per + 1u) * sizeof *r->rq);
}

/* Posts one step: rcount elements from the left into dst, scount from src
 * to the right, in messages of r->per; the receives are r->rq[0, *nr), the
 * sends the *ns after them. */
static void ring_post(ring *r, char *dst, size_t rcount, const char *src, size_t scount, size_t esz,
                      MPI_Datatype t, int tag, MPI_Comm comm, size_t *nr, size_t *ns)
{
    *nr = 0;
    *ns = 0;
    for (size_t at = 0; at < rcount; at += r->per, (*nr)++) {
        size_t len = rcount - at < r->per ? rcount - at : r->per;
        MPI_Irecv(dst + at * esz, (int)len, t, r->left, tag, comm, &r->rq[*nr]);
    }
    for (size_t at = 0; at < scount; at += r->per, (*ns)++) {
        size_t len = scount - at < r->per ? scount - at : r->per;
        MPI_Isend(src + at * esz, (int)len, t, r->right, tag, comm, &r->rq[*nr + *ns]);
    }
}

/* Reduce-scatter round comm's ring: send holds this process's contribution
 * to every position's block (counts[q] elements at offs[q], in position
 * order); mine (which may be send's own block) gets the combination of
 * every position's contribution to this position's block. send is read
 * only, but for mine. */
static void ring_rscatter(dist *d, const char *send, char *mine, const size_t *counts,
                          const size_t *offs, size_t esz, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    ring r;
    ring_open(d, counts, esz, comm, &r);
    int n = r.n, me = r.me;
    char *cur = scratch(d, 3, r.most * esz), *next = scratch(d, 4, r.most * esz);
    bool in_place = mine == send + offs[me] * esz;
    for (int k = 0; k + 1 < n; k++) {
        int sb = ((me - k - 1) % n + n) % n, rb = ((me - k - 2) % n + n) % n;
        bool last = k + 2 == n;
        const char *src = k == 0 ? send + offs[sb] * esz : cur;
        /* the last step lands in mine, unless mine is the own block the
         * chunks combine with: then in next, combined into mine */
        char *dst = last && !in_place ? mine : next;
        size_t nr, ns;
        ring_post(&r, dst, counts[rb], src, counts[sb], esz, t, 11, comm, &nr, &ns);
        const char *own = send + offs[rb] * esz;
        for (size_t c = 0, at = 0; c < nr; c++, at += r.per) {
            size_t len = counts[rb] - at < r.per ? counts[rb] - at : r.per;
            MPI_Wait(&r.rq[c], MPI_STATUS_IGNORE);
            if (last && in_place) {
                MPI_Reduce_local(dst + at * esz, mine + at * esz, (int)len, t, op);
            } else {
                MPI_Reduce_local(own + at * esz, dst + at * esz, (int)len, t, op);
            }
        }
        MPI_Waitall((int)ns, r.rq + nr, MPI_STATUSES_IGNORE);
        char *was = cur;
        cur = next;
        next = was;
    }
    cm_free(r.rq);
}

/* All-gather in place round comm's ring: buf holds every position's block
 * (counts[q] elements at offs[q]); this process's is filled, the others
 * arrive, each passed on to the right as it came from the left, in
 * ring-sized messages. */
static void ring_allgather(dist *d, char *buf, const size_t *counts, const size_t *offs, size_t esz,
                           MPI_Datatype t, MPI_Comm comm)
{
    ring r;
    ring_open(d, counts, esz, comm, &r);
    int n = r.n, me = r.me;
    for (int k = 0; k + 1 < n; k++) {
        int sb = ((me - k) % n + n) % n, rb = ((me - k - 1) % n + n) % n;
        size_t nr, ns;
        ring_post(&r, buf + offs[rb] * esz, counts[rb], buf + offs[sb] * esz, counts[sb], esz, t,
                  12, comm, &nr, &ns);
        MPI_Waitall((int)(nr + ns), r.rq, MPI_STATUSES_IGNORE);
    }
    cm_free(r.rq);
}

/* Position q's share of count elements among n: counts and offsets. */
static void ring_split(size_t count, int n, size_t *counts, size_t *offs)
{
    for (int q = 0; q < n; q++) {
        offs[q] = count * (size_t)q / (size_t)n;
        counts[q] = count * (size_t)(q + 1) / (size_t)n - offs[q];
    }
}

/* All-reduce of count elements of type t from send into recv (the same
 * buffer: in place) on comm: round the ring (a reduce-scatter, then an
 * all-gather of the combined blocks) from RING_MIN bytes on, else
 * MPI_Allreduce in pieces MPI's int counts take. */
static void allreduce_big(dist *d, const void *send, void *recv, size_t count, size_t esz,
                          MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    int n;
    MPI_Comm_size(comm, &n);
    if (n > 1 && count * esz >= d->mp->ring_min && count <= (size_t)INT_MAX && count >= (size_t)n) {
        size_t *counts = xalloc(d->mp, 2u * (size_t)n * sizeof *counts), *offs = counts + n;
        int me;
        MPI_Comm_rank(comm, &me);
        ring_split(count, n, counts, offs);
        if (send != recv) {
            /* this position's block starts as its own contribution */
            memcpy((char *)recv + offs[me] * esz, (const char *)send + offs[me] * esz,
                   counts[me] * esz);
        }
        ring_rscatter(d, send, (char *)recv + offs[me] * esz, counts, offs, esz, t, op, comm);
        ring_allgather(d, recv, counts, offs, esz, t, comm);
        cm_free(counts);
        return;
    }
    const size_t piece = (size_t)1 << 28;
    for (size_t at = 0; at < count; at += piece) {
        size_t k = count - at < piece ? count - at : piece;
        MPI_Allreduce(send == recv ? MPI_IN_PLACE : (const char *)send + at * esz,
                      (char *)recv + at * esz, (int)k, t, op, comm);
    }
}

/* All-reduce of nb buffers of count elements each (send[i] into recv[i],
 * in place when they are the same) over comm, round the ring at once: each
 * step sends that step's block of every buffer before waiting on any, so
 * the groups of a collective that share the processes share the wire
 * instead of taking turns, with no copy into one contiguous buffer. The
 * buffers are split alike (ring_split), so every message has its match on
 * the neighbour in the order both post them. */
static void ring_allreduce_multi(dist *d, const char *const *send, char *const *recv, uint32_t nb,
                                 size_t count, size_t esz, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    size_t *counts = xalloc(d->mp, 2u * (size_t)n * sizeof *counts), *offs = counts + n;
    ring_split(count, n, counts, offs);
    int left = (me + n - 1) % n, right = (me + 1) % n;
    size_t per = ring_per(d->mp, esz), most = counts[n - 1];
    for (int q = 0; q < n; q++) {
        most = counts[q] > most ? counts[q] : most;
    }
    size_t msgs = (most + per - 1u) / per + 1u; /* per buffer and direction */
    MPI_Request *rq = xalloc(d->mp, 2u * nb * msgs * sizeof *rq);
    size_t stride = most * esz;
    char *cur = scratch(d, 3, nb * stride), *next = scratch(d, 4, nb * stride);
    /* reduce-scatter: after step k, next holds block rb combined over k+2 positions */
    for (int k = 0; k + 1 < n; k++) {
        int sb = ((me - k - 1) % n + n) % n, rb = ((me - k - 2) % n + n) % n;
        bool last = k + 2 == n;
        size_t nr = 0, ns = 0;
        for (uint32_t i = 0; i < nb; i++) {
            /* the last step lands in recv's own block, unless that is send's
             * own block too (in place): then in next, combined into it */
            char *dst = last && send[i] != recv[i] ? recv[i] + offs[rb] * esz : next + i * stride;
            for (size_t at = 0; at < counts[rb]; at += per) {
                size_t len = counts[rb] - at < per ? counts[rb] - at : per;
                MPI_Irecv(dst + at * esz, (int)len, t, left, 13, comm, &rq[nr++]);
            }
        }
        for (uint32_t i = 0; i < nb; i++) {
            const char *src = k == 0 ? send[i] + offs[sb] * esz : cur + i * stride;
            for (size_t at = 0; at < counts[sb]; at += per) {
                size_t len = counts[sb] - at < per ? counts[sb] - at : per;
                MPI_Isend(src + at * esz, (int)len, t, right, 13, comm, &rq[nr + ns++]);
            }
        }
        size_t c = 0;
        for (uint32_t i = 0; i < nb; i++) {
            bool in_place = send[i] == recv[i];
            char *dst = last && !in_place ? recv[i] + offs[rb] * esz : next + i * stride;
            const char *own = send[i] + offs[rb] * esz;
            for (size_t at = 0; at < counts[rb]; at += per, c++) {
                size_t len = counts[rb] - at < per ? counts[rb] - at : per;
                MPI_Wait(&rq[c], MPI_STATUS_IGNORE);
                if (last && in_place) {
                    MPI_Reduce_local(dst + at * esz, recv[i] + (offs[rb] + at) * esz, (int)len, t,
                                     op);
                } else {
                    MPI_Reduce_local(own + at * esz, dst + at * esz, (int)len, t, op);
                }
            }
        }
        MPI_Waitall((int)ns, rq + nr, MPI_STATUSES_IGNORE);
        char *was = cur;
        cur = next;
        next = was;
    }
    /* all-gather: each combined block passed on to the right as it came */
    for (int k = 0; k + 1 < n; k++) {
        int sb = ((me - k) % n + n) % n, rb = ((me - k - 1) % n + n) % n;
        size_t m = 0;
        for (uint32_t i = 0; i < nb; i++) {
            for (size_t at = 0; at < counts[rb]; at += per) {
                size_t len = counts[rb] - at < per ? counts[rb] - at : per;
                MPI_Irecv(recv[i] + (offs[rb] + at) * esz, (int)len, t, left, 14, comm, &rq[m++]);
            }
        }
        for (uint32_t i = 0; i < nb; i++) {
            for (size_t at = 0; at < counts[sb]; at += per) {
                size_t len = counts[sb] - at < per ? counts[sb] - at : per;
                MPI_Isend(recv[i] + (offs[sb] + at) * esz, (int)len, t, right, 14, comm, &rq[m++]);
            }
        }
        MPI_Waitall((int)m, rq, MPI_STATUSES_IGNORE);
    }
    cm_free(rq);
    cm_free(counts);
}

/* Reduce-scatter with counts[q] (int) elements for position q, send in
 * position order: round the ring from RING_MIN bytes on, else Open MPI's
 * MPI_Reduce_scatter(_block). */
static void rscatter_big(dist *d, const void *send, void *recv, const int *counts, size_t esz,
                         MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    size_t total = 0;
    bool even = true;
    for (int q = 0; q < n; q++) {
        total += (size_t)counts[q];
        even = even && counts[q] == counts[0];
    }
    if (n > 1 && total * esz >= d->mp->ring_min) {
        size_t *c = xalloc(d->mp, 2u * (size_t)n * sizeof *c), *offs = c + n;
        size_t at = 0;
        for (int q = 0; q < n; q++) {
            c[q] = (size_t)counts[q];
            offs[q] = at;
            at += c[q];
        }
        ring_rscatter(d, send, recv, c, offs, esz, t, op, comm);
        cm_free(c);
    } else if (even) {
        MPI_Reduce_scatter_block(send, recv, counts[0], t, op, comm);
    } else {
        MPI_Reduce_scatter(send, recv, counts, t, op, comm);
    }
}

/* ---- the collectives ------------------------------------------------------------------ */

static void net_add(dist *d, shared *sh, uint32_t me, const xop *x, double t0)
{
    if (d->net_s != NULL && sh->timing[me]) {
        d->net_s[x->op] += MPI_Wtime() - t0;
    }
}

/* The members of group g on process q, in group order, into out; their
 * count. */
static uint32_t members_on(const dist *d, const xop *x, uint32_t g, int q, uint32_t *out)
{
    const int64_t *mem = grp_members(x, g);
    uint32_t n = 0;
    for (uint32_t j = 0; j < x->gsize; j++) {
        if (rank_of(d, (uint32_t)mem[j]) == q) {
            out[n++] = (uint32_t)mem[j];
        }
    }
    return n;
}

/* The one member of group g here, or UINT32_MAX when there are none or
 * several. */
static uint32_t only_member(const dist *d, const xop *x, uint32_t g)
{
    const int64_t *mem = grp_members(x, g);
    uint32_t found = UINT32_MAX, n = 0;
    for (uint32_t j = 0; j < x->gsize; j++) {
        if (here(d, (uint32_t)mem[j])) {
            found = (uint32_t)mem[j];
            n++;
        }
    }
    return n == 1 ? found : UINT32_MAX;
}

/* All-reduce: per set, each group's members here reduced into one block,
 * one MPI_Allreduce over every such group of the set, the result copied to
 * every member here. Groups all here (a set of one) need no MPI. */
static void run_reduce(dist *d, const prog *p, const xop *x, shared *sh, uint32_t me, bool failed)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v];
    size_t blk = I->lcount * I->esz;
    MPI_Datatype t;
    MPI_Op op;
    mpi_reduction(d->mp, I->elem, x->fn, &t, &op);
    for (uint32_t s = 0; s < d->plans[x->op].n_subs; s++) {
        const sub *u = &d->plans[x->op].subs[s];
        const pset *ps = &d->sets[u->set];
        /* Every group of the set with one member on each of its processes
         * (the program says so, the same on every process): straight from
         * each member's operand into its result, a call per group, no
         * copies in and out. A failed run keeps the calls, on scratch. */
        bool direct = ps->n > 1 && I->lcount <= ((size_t)1 << 28) && x->gsize == (uint32_t)ps->n;
        for (uint32_t i = 0; direct && i < u->n_groups; i++) {
            const int64_t *mem = grp_members(x, u->groups[i]);
            for (uint32_t a = 0; direct && a < x->gsize; a++) {
                for (uint32_t b = a + 1u; direct && b < x->gsize; b++) {
                    direct = rank_of(d, (uint32_t)mem[a]) != rank_of(d, (uint32_t)mem[b]);
                }
            }
        }
        if (direct) {
            /* the same choice on every process: lcount, the group count and
             * process 0's ring settings are the same everywhere */
            bool round = I->lcount >= (size_t)ps->n && blk >= d->mp->ring_min;
            const char **sends = xalloc(d->mp, u->n_groups * sizeof *sends);
            char **recvs = xalloc(d->mp, u->n_groups * sizeof *recvs);
            char *s0 = scratch(d, 0, blk * u->n_groups), *s1 = scratch(d, 1, blk * u->n_groups);
            for (uint32_t i = 0; i < u->n_groups; i++) {
                uint32_t one = only_member(d, x, u->groups[i]);
                bool ok = !failed && one != UINT32_MAX && wbufs(sh, one)[v] != NULL &&
                          wbufs(sh, one)[r] != NULL;
                sends[i] = ok ? wbufs(sh, one)[v] : s0 + blk * i;
                recvs[i] = ok ? wbufs(sh, one)[r] : s1 + blk * i;
            }
            double t0 = MPI_Wtime();
            if (round) {
                ring_allreduce_multi(d, sends, recvs, u->n_groups, I->lcount, I->esz, t, op,
                                     ps->comm);
            } else {
                for (uint32_t i = 0; i < u->n_groups; i++) {
                    allreduce_big(d, sends[i], recvs[i], I->lcount, I->esz, t, op, ps->comm);
                }
            }
            net_add(d, sh, me, x, t0);
            cm_free(recvs);
            cm_free(sends);
            continue;
        }
        char *tmp = scratch(d, 0, blk * u->n_groups);
        for (uint32_t i = 0; i < u->n_groups; i++) {
            local_reduce(d, sh, x, u->groups[i], v, x->fn, tmp + blk * i, failed);
        }
        if (ps->n > 1) {
            double t0 = MPI_Wtime();
            allreduce_big(d, tmp, tmp, I->lcount * u->n_groups, I->esz, t, op, ps->comm);
            net_add(d, sh, me, x, t0);
        }
        for (uint32_t i = 0; !failed && i < u->n_groups; i++) {
            const int64_t *mem = grp_members(x, u->groups[i]);
            for (uint32_t j = 0; j < x->gsize; j++) {
                uint32_t dv = (uint32_t)mem[j];
                if (here(d, dv) && wbufs(sh, dv)[r] != NULL) {
                    memcpy(wbufs(sh, dv)[r], tmp + blk * i, blk);
                }
            }
        }
    }
}

/* Remembers that dev's slot of v holds a mirror (buf owned when own). */
static void mirror_note(dist *d, uint32_t dev, uint32_t v, void *buf)
{
    if (d->n_mirs == d->cap_mirs) {
        uint32_t cap = d->cap_mirs ? 2u * d->cap_mirs : 64u;
        mirror *nm = cm_realloc(d->mirs, cap * sizeof *nm);
        if (nm == NULL) {
            die(d->mp, "out of memory for a mirror");
        }
        d->mirs = nm;
        d->cap_mirs = cap;
    }
    d->mirs[d->n_mirs++] = (mirror){dev, v, buf};
}

static void hook_unmirror(ex_dist *base, shared *sh)
{
    dist *d = (dist *)base;
    for (uint32_t i = d->n_mirs; i-- > 0;) {
        if (d->mirs[i].v != UINT32_MAX) {
            wbufs(sh, d->mirs[i].dev)[d->mirs[i].v] = NULL;
        }
        cm_free(d->mirs[i].buf);
    }
    d->n_mirs = 0;
}

/* All-gather: per set, the blocks of the members here of its groups (set
 * order, group order), MPI_Allgather(v) on the set's communicator, the
 * other processes' blocks mirrored into their slots; then every result
 * block here is copied out of its group's blocks (ex_coll_local). */
static cm_status run_gather(dist *d, const prog *p, const xop *x, shared *sh, uint32_t me,
                            bool failed, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0];
    size_t blk = p->vi[v].lcount * p->vi[v].esz;
    if (d->plans[x->op].direct) {
        /* each group's members' blocks straight into every member's result */
        const sub *u = &d->plans[x->op].subs[0];
        const pset *ps = &d->sets[u->set];
        uint32_t r = o->first_result;
        /* MPI_Allgather, not a chunked ring: round a ring of 4 MiB
         * messages (every group at once, the own block copied while the
         * first step was on the wire) it measured no faster, 129 ms
         * median against 106 over 5 interleaved pairs of 64 MiB between
         * two namespace hosts (2026-12-03, load 7-10) */
        double t0 = MPI_Wtime();
        for (uint32_t i = 0; i < u->n_groups; i++) {
            uint32_t one = only_member(d, x, u->groups[i]);
            bool ok = !failed && wbufs(sh, one)[v] != NULL && wbufs(sh, one)[r] != NULL;
            MPI_Allgather(ok ? wbufs(sh, one)[v] : scratch(d, 1, blk), icount(d->mp, blk), MPI_BYTE,
                          ok ? wbufs(sh, one)[r] : scratch(d, 2, blk * (size_t)ps->n),
                          icount(d->mp, blk), MPI_BYTE, ps->comm);
        }
        net_add(d, sh, me, x, t0);
        return CM_OK;
    }
    uint32_t *mem = xalloc(d->mp, sizeof(uint32_t) * x->gsize);
    for (uint32_t s = 0; s < d->plans[x->op].n_subs; s++) {
        const sub *u = &d->plans[x->op].subs[s];
        const pset *ps = &d->sets[u->set];
        if (ps->n < 2) {
            continue;
        }
        int *counts = xalloc(d->mp, sizeof(int) * (size_t)ps->n * 2u);
        int *displs = counts + ps->n;
        size_t total = 0, mine = 0;
        for (int q = 0; q < ps->n; q++) {
            size_t c = 0;
            for (uint32_t i = 0; i < u->n_groups; i++) {
                c += members_on(d, x, u->groups[i], ps->ranks[q], mem) * blk;
            }
            displs[q] = icount(d->mp, total);
            counts[q] = icount(d->mp, c);
            total += c;
            if (ps->ranks[q] == d->mp->rank) {
                mine = c;
            }
        }
        char *send = scratch(d, 1, mine), *recv = xalloc(d->mp, total);
        size_t at = 0;
        for (uint32_t i = 0; i < u->n_groups; i++) {
            uint32_t n = members_on(d, x, u->groups[i], d->mp->rank, mem);
            for (uint32_t j = 0; j < n; j++, at += blk) {
                if (!failed && wbufs(sh, mem[j])[v] != NULL) {
                    memcpy(send + at, wbufs(sh, mem[j])[v], blk);
                }
            }
        }
        bool even = true;
        for (int q = 1; q < ps->n; q++) {
            even = even && counts[q] == counts[0];
        }
        double t0 = MPI_Wtime();
        if (even) {
            MPI_Allgather(send, counts[0], MPI_BYTE, recv, counts[0], MPI_BYTE, ps->comm);
        } else {
            MPI_Allgatherv(send, icount(d->mp, mine), MPI_BYTE, recv, counts, displs, MPI_BYTE,
                           ps->comm);
        }
        net_add(d, sh, me, x, t0);
        /* the other processes' blocks into their devices' slots */
        for (int q = 0; q < ps->n; q++) {
            size_t off = (size_t)displs[q];
            for (uint32_t i = 0; i < u->n_groups; i++) {
                uint32_t n = members_on(d, x, u->groups[i], ps->ranks[q], mem);
                for (uint32_t j = 0; j < n; j++, off += blk) {
                    if (ps->ranks[q] != d->mp->rank) {
                        wbufs(sh, mem[j])[v] = recv + off;
                        mirror_note(d, mem[j], v, NULL);
                    }
                }
            }
        }
        mirror_note(d, me, UINT32_MAX, recv); /* owns recv; the slot is left alone */
        cm_free(counts);
    }
    cm_free(mem);
    cm_status st = failed ? CM_OK : ex_coll_local(p, x, sh, me, true, err);
    return st;
}

/* The box of dev's result block of x at dfrom (extent ext) in src, an
 * operand block held by its group at origin o0: its start there. */
static void rs_from(const prog *p, const xop *x, uint32_t dev, const int64_t *o0, int64_t *from,
                    int64_t *ext)
{
    const sp_op *o = &p->m->ops[x->op];
    const vinfo *O = &p->vi[o->first_result];
    const int64_t *ro = voff(p, o->first_result, dev);
    for (uint32_t k = 0; k < O->rank; k++) {
        from[k] = ro[k] - o0[k];
        ext[k] = valid_len(O, k, ro[k]);
    }
}

static size_t box_count(const int64_t *ext, uint32_t rank)
{
    size_t n = 1;
    for (uint32_t k = 0; k < rank; k++) {
        n *= ext[k] > 0 ? (size_t)ext[k] : 0u;
    }
    return n;
}

/* Reduce-scatter: per set, each group's members here summed into one
 * operand block; the pieces (result blocks) ordered by process, group and
 * member; one MPI_Reduce_scatter(_block) gives each process the sums of
 * its members' pieces, copied into their (zeroed) result blocks. */
static void run_rscatter(dist *d, const prog *p, const xop *x, shared *sh, uint32_t me, bool failed)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    size_t blk = I->lcount * I->esz;
    MPI_Datatype t;
    MPI_Op op;
    mpi_reduction(d->mp, I->elem, RED_ADD, &t, &op);
    if (d->plans[x->op].direct && O->lcount <= ((size_t)1 << 28)) {
        /* each group's member here: its operand's rows scattered, summed,
         * into its result */
        const sub *u = &d->plans[x->op].subs[0];
        const pset *ps = &d->sets[u->set];
        int *counts = xalloc(d->mp, sizeof(int) * (size_t)ps->n);
        for (int q = 0; q < ps->n; q++) {
            counts[q] = (int)O->lcount;
        }
        double t0 = MPI_Wtime();
        for (uint32_t i = 0; i < u->n_groups; i++) {
            uint32_t one = only_member(d, x, u->groups[i]);
            bool ok = !failed && wbufs(sh, one)[v] != NULL && wbufs(sh, one)[r] != NULL;
            rscatter_big(d, ok ? wbufs(sh, one)[v] : scratch(d, 1, blk),
                         ok ? wbufs(sh, one)[r] : scratch(d, 2, O->lcount * O->esz), counts, O->esz,
                         t, op, ps->comm);
        }
        net_add(d, sh, me, x, t0);
        cm_free(counts);
        return;
    }
    uint32_t *mem = xalloc(d->mp, sizeof(uint32_t) * x->gsize);
    int64_t from[EX_MAX_RANK], ext[EX_MAX_RANK];
    static const int64_t origin[EX_MAX_RANK];
    for (uint32_t dv = d->base.lo; !failed && dv < d->base.hi; dv++) {
        if (wbufs(sh, dv)[r] != NULL) {
            memset(wbufs(sh, dv)[r], 0, O->lcount * O->esz);
        }
    }
    for (uint32_t s = 0; s < d->plans[x->op].n_subs; s++) {
        const sub *u = &d->plans[x->op].subs[s];
        const pset *ps = &d->sets[u->set];
        char *sum = scratch(d, 0, blk * u->n_groups);
        for (uint32_t i = 0; i < u->n_groups; i++) {
            local_reduce(d, sh, x, u->groups[i], v, RED_ADD, sum + blk * i, failed);
        }
        /* pieces: process by process (the communicator's order) */
        int *counts = xalloc(d->mp, sizeof(int) * (size_t)ps->n);
        size_t total = 0;
        for (int q = 0; q < ps->n; q++) {
            size_t c = 0;
            for (uint32_t i = 0; i < u->n_groups; i++) {
                uint32_t n = members_on(d, x, u->groups[i], ps->ranks[q], mem);
                for (uint32_t j = 0; j < n; j++) {
                    rs_from(p, x, mem[j], voff(p, v, mem[j]), from, ext);
                    c += box_count(ext, O->rank);
                }
            }
            counts[q] = icount(d->mp, c);
            total += c;
        }
        char *send = scratch(d, 1, total * O->esz);
        size_t at = 0;
        for (int q = 0; q < ps->n; q++) {
            for (uint32_t i = 0; i < u->n_groups; i++) {
                uint32_t n = members_on(d, x, u->groups[i], ps->ranks[q], mem);
                for (uint32_t j = 0; j < n; j++) {
                    rs_from(p, x, mem[j], voff(p, v, mem[j]), from, ext);
                    ex_coll_move(sum + blk * i, I->ldims, from, send + at * O->esz, ext, origin,
                                 ext, O->rank, O->esz);
                    at += box_count(ext, O->rank);
                }
            }
        }
        int myq = 0;
        for (int q = 0; q < ps->n; q++) {
            myq = ps->ranks[q] == d->mp->rank ? q : myq;
        }
        char *recv = scratch(d, 2, (size_t)counts[myq] * O->esz);
        if (ps->n > 1) {
            double t0 = MPI_Wtime();
            rscatter_big(d, send, recv, counts, O->esz, t, op, ps->comm);
            net_add(d, sh, me, x, t0);
        } else {
            memcpy(recv, send, (size_t)counts[0] * O->esz);
        }
        at = 0;
        for (uint32_t i = 0; i < u->n_groups; i++) {
            uint32_t n = members_on(d, x, u->groups[i], d->mp->rank, mem);
            for (uint32_t j = 0; j < n; j++) {
                rs_from(p, x, mem[j], voff(p, v, mem[j]), from, ext);
                if (!failed && wbufs(sh, mem[j])[r] != NULL) {
                    ex_coll_move(recv + at * O->esz, ext, origin, wbufs(sh, mem[j])[r], O->ldims,
                                 origin, ext, O->rank, O->esz);
                }
                at += box_count(ext, O->rank);
            }
        }

        cm_free(counts);
    }
    cm_free(mem);
}

/* The pieces device src's operand block gives device dev's result block,
 * walked in one order by sender and receiver: dev's sources in their
 * order. */
typedef struct piece {
    uint32_t src, dev;
    int64_t ext[EX_MAX_RANK], sfrom[EX_MAX_RANK], dfrom[EX_MAX_RANK];
    size_t bytes;
} piece;

/* Bytes process a sends process b (a == b: what stays here) for x. */
static size_t pieces_bytes(const dist *d, const prog *p, const xop *x, int a, int b, uint32_t *buf)
{
    const vinfo *O = &p->vi[p->m->ops[x->op].first_result];
    uint32_t lo = 0, hi = 0;
    ex_mpi_devices(d->n_dev, (uint32_t)b, (uint32_t)d->mp->size, &lo, &hi);
    size_t total = 0;
    for (uint32_t dv = lo; dv < hi; dv++) {
        uint32_t n = ex_coll_sources(p, x, dv, false, buf);
        for (uint32_t j = 0; j < n; j++) {
            piece pc;
            if (rank_of(d, buf[j]) == a &&
                ex_coll_piece(p, x, buf[j], dv, pc.ext, pc.sfrom, pc.dfrom)) {
                total += box_count(pc.ext, O->rank) * O->esz;
            }
        }
    }
    return total;
}

/* Packs (pack) or unpacks the part for destination device dv of what
 * process a sends dv's process for x: dv's sources on a in order, from
 * wire (where dv's part begins); returns its bytes. buf: p->n_dev entries. */
static size_t pieces_move_dev(const dist *d, const prog *p, const xop *x, shared *sh, int a,
                              uint32_t dv, char *wire, bool pack, uint32_t *buf)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    static const int64_t origin[EX_MAX_RANK];
    size_t at = 0;
    uint32_t n = ex_coll_sources(p, x, dv, false, buf);
    for (uint32_t j = 0; j < n; j++) {
        piece pc;
        if (rank_of(d, buf[j]) != a ||
            !ex_coll_piece(p, x, buf[j], dv, pc.ext, pc.sfrom, pc.dfrom)) {
            continue;
        }
        size_t bytes = box_count(pc.ext, O->rank) * O->esz;
        if (wire == NULL) {
            /* only counting */
        } else if (pack) {
            if (wbufs(sh, buf[j])[v] != NULL) {
                ex_coll_move(wbufs(sh, buf[j])[v], I->ldims, pc.sfrom, wire + at, pc.ext, origin,
                             pc.ext, O->rank, O->esz);
            }
        } else if (wbufs(sh, dv)[r] != NULL) {
            ex_coll_move(wire + at, pc.ext, origin, wbufs(sh, dv)[r], O->ldims, pc.dfrom, pc.ext,
                         O->rank, O->esz);
        }
        at += bytes;
    }
    return at;
}

/* One pair's packing or unpacking as a crew job: item i is destination
 * device lo + i of process b, its part at offs[i] of wire. */
typedef struct move_job {
    const dist *d;
    const prog *p;
    const xop *x;
    shared *sh;
    int a;
    uint32_t lo;
    char *wire;
    bool pack;
    const size_t *offs;
    uint32_t *bufs; /* p->n_dev entries per item */
} move_job;

static void move_item(void *ctx, uint32_t i)
{
    const move_job *j = ctx;
    (void)pieces_move_dev(j->d, j->p, j->x, j->sh, j->a, j->lo + i, j->wire + j->offs[i], j->pack,
                          j->bufs + (size_t)i * j->p->n_dev);
}

/* Packs (pack) or unpacks what process a sends process b for x: dst
 * devices of b in order, each one's sources on a in order; spread over
 * the crew, one destination device an item. */
static void pieces_move(dist *d, const prog *p, const xop *x, shared *sh, int a, int b, char *wire,
                        bool pack, uint32_t *buf)
{
    uint32_t lo = 0, hi = 0;
    ex_mpi_devices(d->n_dev, (uint32_t)b, (uint32_t)d->mp->size, &lo, &hi);
    uint32_t n = hi - lo;
    size_t *offs = xalloc(d->mp, sizeof(size_t) * (n + 1u));
    uint32_t *bufs = xalloc(d->mp, sizeof(uint32_t) * p->n_dev * (size_t)(n + 1u));
    size_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        offs[i] = at;
        at += pieces_move_dev(d, p, x, sh, a, lo + i, NULL, pack, buf);
    }
    move_job j = {d, p, x, sh, a, lo, wire, pack, offs, bufs};
    crew_run(d, move_item, &j, n);
    cm_free(bufs);
    cm_free(offs);
}

/* Copies the pieces whose source and destination are both here: item i
 * is destination device lo + i. */
typedef struct here_job {
    const dist *d;
    const prog *p;
    const xop *x;
    shared *sh;
    uint32_t *bufs; /* p->n_dev entries per item */
} here_job;

static void here_item(void *ctx, uint32_t i)
{
    const here_job *j = ctx;
    const dist *d = j->d;
    const prog *p = j->p;
    const xop *x = j->x;
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result, dv = d->base.lo + i;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    uint32_t *buf = j->bufs + (size_t)i * p->n_dev;
    uint32_t n = ex_coll_sources(p, x, dv, false, buf);
    for (uint32_t k = 0; k < n; k++) {
        piece pc;
        if (here(d, buf[k]) && wbufs(j->sh, buf[k])[v] != NULL && wbufs(j->sh, dv)[r] != NULL &&
            ex_coll_piece(p, x, buf[k], dv, pc.ext, pc.sfrom, pc.dfrom)) {
            ex_coll_move(wbufs(j->sh, buf[k])[v], I->ldims, pc.sfrom, wbufs(j->sh, dv)[r], O->ldims,
                         pc.dfrom, pc.ext, O->rank, O->esz);
        }
    }
}

static void pieces_here(dist *d, const prog *p, const xop *x, shared *sh)
{
    uint32_t n = d->base.hi - d->base.lo;
    uint32_t *bufs = xalloc(d->mp, sizeof(uint32_t) * p->n_dev * (size_t)(n + 1u));
    here_job j = {d, p, x, sh, bufs};
    crew_run(d, here_item, &j, n);
    cm_free(bufs);
}

/* All-to-all on one communicator per process (PL_A2A), or a collective
 * permute or reshard across the world (PL_P2P): every receive posted
 * first, then each other process's pieces packed and sent at once, one
 * destination after the next starting from this process's right (so the
 * wire carries the first while the next is packed, and the processes do
 * not all send to the same one first); the pieces staying here copied
 * device to device while those are in flight, never through MPI; and
 * each arrival unpacked as it completes. Both ends count a pair's bytes
 * alike (pieces_bytes), so pairs with nothing to exchange post nothing. */
static void run_exchange(dist *d, const prog *p, const xop *x, shared *sh, uint32_t me, bool failed)
{
    int rank = d->mp->rank;
    uint32_t *buf = xalloc(d->mp, sizeof(uint32_t) * p->n_dev);
    const plan *pl = &d->plans[x->op];
    int n = d->mp->size, *ranks = NULL, pos = rank;
    MPI_Comm comm = d->mp->world;
    if (pl->kind == PL_A2A) {
        /* one set per process (plan_make) */
        const pset *ps = &d->sets[pl->subs[0].set];
        n = ps->n;
        ranks = ps->ranks;
        comm = ps->comm;
        for (int q = 0; q < n; q++) {
            pos = ranks[q] == rank ? q : pos;
        }
    }
    size_t *sb = xalloc(d->mp, sizeof(size_t) * (size_t)n * 4u), *rb = sb + n;
    size_t *soff = rb + n, *roff = soff + n;
    size_t st_total = 0, rt_total = 0;
    for (int q = 0; q < n; q++) {
        int wq = ranks != NULL ? ranks[q] : q;
        bool self = wq == rank;
        sb[q] = self ? 0 : pieces_bytes(d, p, x, rank, wq, buf);
        rb[q] = self ? 0 : pieces_bytes(d, p, x, wq, rank, buf);
        soff[q] = st_total;
        roff[q] = rt_total;
        st_total += sb[q];
        rt_total += rb[q];
    }
    char *send = scratch(d, 1, st_total), *recv = scratch(d, 2, rt_total);
    MPI_Request *rq = xalloc(d->mp, sizeof(MPI_Request) * (size_t)n * 2u);
    int *from = xalloc(d->mp, sizeof(int) * (size_t)n);
    int n_r = 0, n_s = 0;
    double t0 = MPI_Wtime();
    for (int q = 0; q < n; q++) {
        if (rb[q] > 0) {
            from[n_r] = q;
            MPI_Irecv(recv + roff[q], icount(d->mp, rb[q]), MPI_BYTE, q, 11, comm, &rq[n_r++]);
        }
    }
    net_add(d, sh, me, x, t0);
    for (int k = 1; k < n; k++) {
        int q = (pos + k) % n, wq = ranks != NULL ? ranks[q] : q;
        if (sb[q] == 0) {
            continue;
        }
        if (!failed) {
            pieces_move(d, p, x, sh, rank, wq, send + soff[q], true, buf);
        }
        t0 = MPI_Wtime();
        MPI_Isend(send + soff[q], icount(d->mp, sb[q]), MPI_BYTE, q, 11, comm, &rq[n_r + n_s++]);
        net_add(d, sh, me, x, t0);
    }
    if (!failed) {
        pieces_here(d, p, x, sh);
    }
    for (int k = 0; k < n_r; k++) {
        int at = MPI_UNDEFINED;
        t0 = MPI_Wtime();
        MPI_Waitany(n_r, rq, &at, MPI_STATUS_IGNORE);
        net_add(d, sh, me, x, t0);
        if (at == MPI_UNDEFINED) {
            break;
        }
        int q = from[at], wq = ranks != NULL ? ranks[q] : q;
        if (!failed) {
            pieces_move(d, p, x, sh, wq, rank, recv + roff[q], false, buf);
        }
    }
    t0 = MPI_Wtime();
    MPI_Waitall(n_s, rq + n_r, MPI_STATUSES_IGNORE);
    net_add(d, sh, me, x, t0);
    cm_free(from);
    cm_free(rq);
    cm_free(sb);
    cm_free(buf);
}

static cm_status hook_mirror(ex_dist *base, shared *sh, const uint32_t *vals, uint32_t n,
                             cm_error *err)
{
    dist *d = (dist *)base;
    const prog *p = d->p;
    int size = d->mp->size;
    bool failed = atomic_load(&sh->failed) != 0;
    int *counts = xalloc(d->mp, sizeof(int) * (size_t)size * 2u), *displs = counts + size;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = vals[i];
        size_t blk = p->vi[v].lcount * p->vi[v].esz, total = 0;
        for (int q = 0; q < size; q++) {
            uint32_t lo = 0, hi = 0;
            ex_mpi_devices(d->n_dev, (uint32_t)q, (uint32_t)size, &lo, &hi);
            displs[q] = icount(d->mp, total);
            counts[q] = icount(d->mp, (hi - lo) * blk);
            total += (hi - lo) * blk;
        }
        char *all = xalloc(d->mp, total);
        char *mine = all + displs[d->mp->rank];
        for (uint32_t dv = d->base.lo; !failed && dv < d->base.hi; dv++) {
            if (wbufs(sh, dv)[v] != NULL) {
                memcpy(mine + (dv - d->base.lo) * blk, wbufs(sh, dv)[v], blk);
            }
        }
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, all, counts, displs, MPI_BYTE, d->mp->world);
        for (uint32_t dv = 0; dv < d->n_dev; dv++) {
            if (!here(d, dv)) {
                wbufs(sh, dv)[v] = all + (size_t)dv * blk;
                mirror_note(d, dv, v, NULL);
            }
        }
        mirror_note(d, d->base.lo, UINT32_MAX, all);
    }
    cm_free(counts);
    (void)err;
    return CM_OK;
}

static cm_status hook_coll(ex_dist *base, const prog *p, const xop *x, shared *sh, uint32_t me,
                           cm_error *err)
{
    dist *d = (dist *)base;
    bool failed = atomic_load(&sh->failed) != 0;
    cm_status st = CM_OK;
    crew_begin(d);
    switch (d->plans[x->op].kind) {
    case PL_REDUCE:
        run_reduce(d, p, x, sh, me, failed);
        break;
    case PL_GATHER:
        st = run_gather(d, p, x, sh, me, failed, err);
        break;
    case PL_RSCATTER:
        run_rscatter(d, p, x, sh, me, failed);
        break;
    case PL_A2A:
    case PL_P2P:
        run_exchange(d, p, x, sh, me, failed);
        break;
    default: {
        /* a dynamic_update_slice read across devices reads its update too */
        const sp_op *mo = &p->m->ops[x->op];
        uint32_t vs[2] = {mo->operands[0], mo->n_operands > 1 ? mo->operands[1] : 0};
        uint32_t nv = x->peer_read && x->kind == SP_OP_DYNAMIC_UPDATE_SLICE ? 2u : 1u;
        double t0 = MPI_Wtime();
        st = hook_mirror(base, sh, vs, nv, err);
        net_add(d, sh, me, x, t0);
        if (st == CM_OK && !failed) {
            st = ex_coll_local(p, x, sh, me, true, err);
        }
        break;
    }
    }
    hook_unmirror(base, sh);
    crew_end(d);
    return st;
}

static int64_t hook_vote(ex_dist *base, int64_t mine)
{
    dist *d = (dist *)base;
    int size = d->mp->size;
    int64_t *all = xalloc(d->mp, sizeof(int64_t) * (size_t)size);
    MPI_Allgather(&mine, 1, MPI_INT64_T, all, 1, MPI_INT64_T, d->mp->world);
    int64_t agreed = all[0];
    for (int q = 0; q < size; q++) {
        if (all[q] == INT64_MIN) {
            agreed = INT64_MIN;
            break;
        }
        if (all[q] != agreed) {
            agreed = INT64_MIN + 1;
        }
    }
    cm_free(all);
    return agreed;
}

static void hook_sync(ex_dist *base)
{
    dist *d = (dist *)base;
    MPI_Barrier(d->mp->world);
}

static const ex_dist_ops mpi_ops = {hook_prepare, hook_release, hook_crosses,
                                    hook_coll,    hook_mirror,  hook_unmirror,
                                    hook_vote,    hook_sync,    hook_help};

/* ---- the check ------------------------------------------------------------------------ */

static void sets_free(dist *d)
{
    for (uint32_t i = 0; i < d->n_sets; i++) {
        if (d->sets[i].comm != MPI_COMM_NULL) {
            MPI_Comm_free(&d->sets[i].comm);
        }
        cm_free(d->sets[i].in);
        cm_free(d->sets[i].ranks);
    }
    cm_free(d->sets);
    cm_free(d->mirs);
    cm_free(d->rank_of);
    for (int i = 0; i < EX_MPI_SCRATCH; i++) {
        cm_free(d->scr[i]);
    }
}

/* Result j of every process into process 0's got[j] (its seen mask
 * merged): elements two processes both hold must agree bit for bit. */
static cm_status gather_result(ex_mpi *mp, ex_tensor *t, uint8_t *seen, uint32_t j, cm_error *err)
{
    size_t esz = sp_elem_bytes(t->elem), bytes = t->n * esz;
    if (mp->rank != 0) {
        send_big(mp, t->data, bytes, 0);
        send_big(mp, seen, t->n, 0);
        return CM_OK;
    }
    char *data = xalloc(mp, bytes);
    uint8_t *s = xalloc(mp, t->n);
    cm_status st = CM_OK;
    for (int q = 1; q < mp->size; q++) {
        recv_big(mp, data, bytes, q);
        recv_big(mp, s, t->n, q);
        for (size_t i = 0; st == CM_OK && i < t->n; i++) {
            if (!s[i]) {
                continue;
            }
            char *dst = (char *)t->data + i * esz;
            if (seen[i] && memcmp(dst, data + i * esz, esz) != 0) {
                char where[160];
                ex_coords_text(t, i, where, sizeof where);
                st = cm_error_set(err, CM_EINTERNAL, NULL,
                                  "result %u: replicas disagree at %s (MPI process %d)", j, where,
                                  q);
            }
            memcpy(dst, data + i * esz, esz);
            seen[i] = 1;
        }
    }
    cm_free(data);
    cm_free(s);
    return st;
}

cm_status ex_mpi_check_modules(ex_mpi *mp, sp_module *part, const sp_module *ref,
                               const ex_check_opts *o, ex_report *r, ex_mpi_colls *c, cm_error *err)
{
    double *net_s = c != NULL ? c->net_s : NULL;
    memset(r, 0, sizeof *r);
    uint32_t n_rep, n_part, spmd_at = SP_NONE;
    if (ex_module_spmd(part, &n_rep, &n_part, &spmd_at) != CM_OK) {
        return cm_error_oom(err);
    }
    if (spmd_at != SP_NONE) {
        return sp_op_error(part, spmd_at, err,
                           "a per-process program (%u replicas x %u partitions, or StableHLO "
                           "collectives outside sdy.manual_computation) cannot run under --mpi "
                           "yet; run it without --mpi",
                           n_rep, n_part);
    }
    for (uint32_t i = 0; i < part->n_ops; i++) {
        if (ex_is_check_op(part, i)) {
            return sp_op_error(part, i, err,
                               "check ops are not evaluated under --mpi yet; run it without "
                               "--mpi");
        }
    }
    uint32_t n_dev = o->n_devices > 0 ? o->n_devices : ex_module_devices(part);
    if (n_dev < (uint32_t)mp->size) {
        return cm_error_set(err, CM_EINVAL, NULL,
                            "%u devices cannot be spread over %d MPI processes (one at least "
                            "each)",
                            n_dev, mp->size);
    }
    ex_tensor *args = NULL, *want = NULL, *got = NULL;
    uint32_t n_args = 0, n_want = 0, n_got = 0;
    uint8_t **seen = NULL;
    cm_status st = ex_args_make(ref, o->seed, &args, &n_args, err);
    st = ex_mpi_agree(mp, st, err);
    if (st != CM_OK) {
        ex_tensors_free(args, n_args);
        return st;
    }
    if (mp->rank == 0) {
        ex_exec_opts eo = {.replicated = true, .iters = 1, .iter_s = &r->ref_s};
        st = ex_exec_run(ref, &eo, args, n_args, &want, &n_want, err);
    }
    /* the partitioned run on every process, even where the reference failed */
    dist d;
    memset(&d, 0, sizeof d);
    d.base.ops = &mpi_ops;
    d.mp = mp;
    d.n_dev = n_dev;
    d.net_s = net_s;
    d.path = c != NULL ? c->path : NULL;
    ex_mpi_devices(n_dev, (uint32_t)mp->rank, (uint32_t)mp->size, &d.base.lo, &d.base.hi);
    /* without the crew's lock, lo packs alone */
    if (pthread_mutex_init(&d.mu, NULL) == 0) {
        if (pthread_cond_init(&d.cv, NULL) == 0) {
            d.crew_ok = true;
        } else {
            pthread_mutex_destroy(&d.mu);
        }
    }
    ex_exec_opts eo = {.n_devices = n_dev,
                       .iters = o->iters,
                       .iter_s = o->iter_s,
                       .affinity = o->affinity,
                       .op_s = o->op_s,
                       .op_from = o->op_from};
    cm_error e2;
    cm_error_clear(&e2);
    cm_status s2 =
        ex_exec_run_dist(part, &eo, &d.base, NULL, NULL, args, n_args, &got, &n_got, &seen, &e2);
    if (st == CM_OK && s2 != CM_OK) {
        st = s2;
        if (err != NULL) {
            *err = e2;
        }
    }
    sets_free(&d);
    cm_free(d.ep);
    if (d.crew_ok) {
        pthread_cond_destroy(&d.cv);
        pthread_mutex_destroy(&d.mu);
    }
    st = ex_mpi_agree(mp, st, err);
    for (uint32_t j = 0; st == CM_OK && j < n_got; j++) {
        cm_status sj = gather_result(mp, &got[j], seen[j], j, err);
        st = ex_mpi_agree(mp, sj, err);
    }
    r->n_devices = n_dev;
    if (st == CM_OK) {
        /* timers: the slowest process's runs, every process's devices */
        uint32_t iters = o->iters > 0 ? o->iters : 1;
        if (o->iter_s != NULL) {
            MPI_Reduce(mp->rank == 0 ? MPI_IN_PLACE : o->iter_s, o->iter_s, (int)iters, MPI_DOUBLE,
                       MPI_MAX, 0, mp->world);
        }
        if (o->op_s != NULL) {
            size_t n = (size_t)n_dev * part->n_ops;
            const size_t chunk = (size_t)1 << 26;
            for (size_t at = 0; at < n; at += chunk) {
                int k = (int)(n - at < chunk ? n - at : chunk);
                MPI_Reduce(mp->rank == 0 ? MPI_IN_PLACE : o->op_s + at, o->op_s + at, k, MPI_DOUBLE,
                           MPI_SUM, 0, mp->world);
            }
        }
        if (net_s != NULL) {
            /* the process that waited least for the others (the last to
             * arrive): its time in MPI is the closest to the transfer's */
            MPI_Reduce(mp->rank == 0 ? MPI_IN_PLACE : net_s, net_s, (int)part->n_ops, MPI_DOUBLE,
                       MPI_MIN, 0, mp->world);
        }
    }
    if (st == CM_OK && mp->rank == 0) {
        if (n_got != n_want) {
            st = cm_error_set(err, CM_EINVAL, NULL, "%u results, the reference has %u", n_got,
                              n_want);
        } else {
            ex_tensors_compare(want, got, n_want, ex_module_contraction(ref), &r->mm);
            sp_cost_opts co;
            sp_cost_opts_init(&co);
            sp_cost *cost = NULL;
            cm_error ce;
            cm_error_clear(&ce);
            if (sp_cost_compute(part, &co, &cost, &ce) == CM_OK) {
                r->flops = sp_cost_get_summary(cost)->flops * (double)n_dev;
                sp_cost_destroy(cost);
            }
        }
    }
    for (uint32_t j = 0; seen != NULL && j < n_got; j++) {
        cm_free(seen[j]);
    }
    cm_free(seen);
    ex_tensors_free(args, n_args);
    ex_tensors_free(want, n_want);
    ex_tensors_free(got, n_got);
    return st;
}

cm_status ex_mpi_colls_json(const ex_mpi *mp, const sp_module *m, const double *op_s,
                            const ex_mpi_colls *c, uint32_t n_dev, uint64_t runs, cm_buf *b)
{
    if (b->len == 0) {
        cm_buf_putc(b, ','); /* a fragment to append to an object */
    }
    cm_json_put_key(b, "mpi");
    cm_buf_putc(b, '{');
    cm_json_put_kv_u64(b, "processes", (uint64_t)mp->size);
    cm_json_put_key(b, "hosts");
    cm_buf_putc(b, '[');
    for (int k = 0; k < mp->size; k++) {
        cm_json_put_sep(b);
        cm_json_put_cstr(b, ex_mpi_host(mp, (uint32_t)k));
    }
    cm_buf_putc(b, ']');
    cm_json_put_key(b, "collectives");
    cm_buf_putc(b, '[');
    for (uint32_t i = 0; op_s != NULL && runs > 0 && c->path != NULL && i < m->n_ops; i++) {
        const sp_op *o = &m->ops[i];
        if (!sp_op_is_sdy_collective(o->kind) || c->path[i] == NULL) {
            continue;
        }
        double total = 0;
        for (uint32_t d = 0; d < n_dev; d++) {
            total += op_s[(size_t)d * m->n_ops + i];
        }
        total /= (double)n_dev * (double)runs;
        double net = c->net_s != NULL ? c->net_s[i] / (double)runs : 0.0;
        cm_json_put_sep(b);
        cm_buf_putc(b, '{');
        cm_json_put_kv_u64(b, "op", i);
        cm_json_put_kv_str(b, "kind", o->name);
        cm_json_put_kv_u64(b, "line", o->line);
        cm_json_put_kv_str(b, "path", c->path[i]);
        cm_json_put_kv_f64(b, "mean_s", total);
        cm_json_put_kv_f64(b, "network_s", net);
        cm_json_put_kv_f64(b, "local_s", total > net ? total - net : 0.0);
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "]}");
    return b->oom ? CM_ENOMEM : CM_OK;
}

/* Median seconds of 5 f32 sum all-reduces of bytes in all between world
 * ranks 0 and 1, split over nb buffers going round the ring at once as a
 * run's groups do (ring_allreduce_multi, each from its operand into a
 * separate result, as a run's direct all-reduce), on comm (theirs); the
 * others return 0. */
static double allreduce_time(ex_mpi *mp, size_t bytes, uint32_t nb, MPI_Comm comm)
{
    if (comm == MPI_COMM_NULL) {
        return 0;
    }
    size_t count = bytes / sizeof(float) / nb;
    count = count < 2 ? 2 : count;
    float *a = xalloc(mp, nb * count * sizeof *a), *b = xalloc(mp, nb * count * sizeof *b);
    for (size_t i = 0; i < nb * count; i++) {
        a[i] = (float)(i % 101u) * 0.5f;
    }
    memset(b, 0, nb * count * sizeof *b);
    dist d;
    memset(&d, 0, sizeof d);
    d.mp = mp;
    const char **send = xalloc(mp, nb * sizeof *send);
    char **recv = xalloc(mp, nb * sizeof *recv);
    for (uint32_t i = 0; i < nb; i++) {
        send[i] = (const char *)(a + i * count);
        recv[i] = (char *)(b + i * count);
    }
    double t[6];
    for (int rep = 0; rep < 6; rep++) { /* the first touches the ring's buffers */
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        ring_allreduce_multi(&d, send, recv, nb, count, sizeof(float), MPI_FLOAT, MPI_SUM, comm);
        double dt = MPI_Wtime() - t0, other = 0;
        /* the slower of the two */
        MPI_Allreduce(&dt, &other, 1, MPI_DOUBLE, MPI_MAX, comm);
        t[rep] = other;
    }
    for (int i = 0; i < EX_MPI_SCRATCH; i++) {
        cm_free(d.scr[i]);
    }
    cm_free(recv);
    cm_free(send);
    cm_free(a);
    cm_free(b);
    /* the median of the 5 after the first */
    for (int i = 1; i < 6; i++) {
        for (int k = i + 1; k < 6; k++) {
            if (t[k] < t[i]) {
                double x = t[i];
                t[i] = t[k];
                t[k] = x;
            }
        }
    }
    return t[3];
}

cm_status ex_mpi_link_measure(ex_mpi *mp, size_t bytes, uint32_t groups, ex_mpi_link *out,
                              cm_error *err)
{
    memset(out, 0, sizeof *out);
    if (groups < 1u || groups > 64u) {
        return cm_error_set(err, CM_EINVAL, NULL,
                            "measuring the network: %u groups at once (1 to 64)", groups);
    }
    if (mp->size < 2) {
        return cm_error_set(err, CM_EINVAL, NULL,
                            "measuring the network needs at least 2 MPI processes (under mpirun "
                            "on 2 hosts)");
    }
    double figs[4] = {0, 0, 0, 0};
    if (mp->rank < 2) {
        int peer = 1 - mp->rank;
        char *buf = xalloc(mp, bytes > 8 ? bytes : 8);
        double best = 1e30;
        for (int batch = 0; batch < 5; batch++) {
            double t0 = MPI_Wtime();
            for (int i = 0; i < 50; i++) {
                if (mp->rank == 0) {
                    MPI_Send(buf, 8, MPI_BYTE, peer, 21, mp->world);
                    MPI_Recv(buf, 8, MPI_BYTE, peer, 21, mp->world, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, 8, MPI_BYTE, peer, 21, mp->world, MPI_STATUS_IGNORE);
                    MPI_Send(buf, 8, MPI_BYTE, peer, 21, mp->world);
                }
            }
            double rtt = (MPI_Wtime() - t0) / 50;
            best = rtt < best ? rtt : best;
        }
        figs[1] = best / 2;
        /* Both ways at once, as every collective across processes sends
         * (a ring step sends right while it receives from the left; an
         * all-to-all both ways): where the two ends share cores or a
         * half-duplex path, that is what a collective gets, not the one-way
         * figure. In messages of the ring's size (at most 1024 of them). */
        char *in = xalloc(mp, bytes > 8 ? bytes : 8);
        size_t msg_len = (size_t)mp->ring_chunk, n_msg;
        msg_len = msg_len < bytes / 1024u + 1u ? bytes / 1024u + 1u : msg_len;
        msg_len = msg_len > ((size_t)1 << 30) ? (size_t)1 << 30 : msg_len;
        n_msg = bytes == 0 ? 0 : (bytes + msg_len - 1u) / msg_len;
        MPI_Request *rq = xalloc(mp, 2u * (n_msg + 1u) * sizeof *rq);
        best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            /* start together: the 8-byte exchange lines the two up */
            MPI_Sendrecv(buf, 8, MPI_BYTE, peer, 23, in, 8, MPI_BYTE, peer, 23, mp->world,
                         MPI_STATUS_IGNORE);
            double t0 = MPI_Wtime();
            size_t k = 0;
            for (size_t at = 0; at < bytes; at += msg_len) {
                size_t len = bytes - at < msg_len ? bytes - at : msg_len;
                MPI_Irecv(in + at, (int)len, MPI_BYTE, peer, 24, mp->world, &rq[k++]);
            }
            for (size_t at = 0; at < bytes; at += msg_len) {
                size_t len = bytes - at < msg_len ? bytes - at : msg_len;
                MPI_Isend(buf + at, (int)len, MPI_BYTE, peer, 24, mp->world, &rq[k++]);
            }
            MPI_Waitall((int)k, rq, MPI_STATUSES_IGNORE);
            /* the slower of the two ends: process 1's time to process 0 */
            double dt = MPI_Wtime() - t0, other = 0;
            MPI_Sendrecv(&dt, 1, MPI_DOUBLE, peer, 25, &other, 1, MPI_DOUBLE, peer, 25, mp->world,
                         MPI_STATUS_IGNORE);
            dt = other > dt ? other : dt;
            best = dt > 0 && dt < best ? dt : best;
        }
        cm_free(rq);
        cm_free(in);
        figs[0] = best < 1e30 ? (double)bytes / best : 0;
        cm_free(buf);
    }
    /* All-reduces as the runs do them, `groups` at once: the stream above
     * leaves out what the ring adds (its two halves one after the other,
     * the combining, the neighbour waits). The cost model prices an
     * all-reduce of S bytes as 2(n-1)/n S on the wire (S for two) over the
     * link plus 2(n-1) steps of latency, so the line through two sizes,
     * bytes and bytes / 16 in all, gives both: its slope the bandwidth,
     * its intercept what every all-reduce costs beyond its bytes (which
     * the one size alone spread over the bytes, short for small tensors
     * and long for large ones). Where the two disagree beyond reason (the
     * machine's load moved between them), the large one alone holds, and
     * the small one's excess over it is the fixed part. */
    MPI_Comm pair = MPI_COMM_NULL;
    MPI_Comm_split(mp->world, mp->rank < 2 ? 0 : MPI_UNDEFINED, mp->rank, &pair);
    size_t small = bytes / 16u;
    double tb = allreduce_time(mp, bytes, groups, pair);
    double ts = allreduce_time(mp, small, groups, pair);
    if (pair != MPI_COMM_NULL) {
        MPI_Comm_free(&pair);
    }
    double whole = tb > 0 ? (double)bytes / tb : 0, slope = 0;
    if (tb > ts && ts > 0) {
        slope = (double)(bytes - small) / (tb - ts);
    }
    if (slope > 0 && slope <= 2.0 * whole) {
        figs[2] = slope;
        figs[3] = tb - (double)bytes / slope;
    } else {
        figs[2] = whole;
        figs[3] = whole > 0 ? ts - (double)small / whole : 0;
    }
    figs[3] = figs[3] > 0 ? figs[3] : 0;
    MPI_Bcast(figs, 4, MPI_DOUBLE, 0, mp->world);
    out->stream_bw = figs[0];
    out->latency = figs[1];
    out->allreduce_bw = figs[2];
    out->allreduce_fixed = figs[3];
    return CM_OK;
}

cm_status ex_mpi_allgather_f64(ex_mpi *mp, const double *mine, size_t n, double *all_out,
                               cm_error *err)
{
    if (n > 4096) {
        return cm_error_set(err, CM_EINVAL, NULL, "too many figures to gather (%zu)", n);
    }
    MPI_Allgather(mine, (int)n, MPI_DOUBLE, all_out, (int)n, MPI_DOUBLE, mp->world);
    return CM_OK;
}

#else /* EX_NO_MPI */

struct ex_mpi {
    int unused;
};

static cm_status no_mpi(cm_error *err)
{
    return cm_error_set(err, CM_EIO, NULL,
                        "this shardplan was built without MPI (no Open MPI development files: "
                        "libopenmpi-dev); rebuild with them for --mpi");
}

cm_status ex_mpi_init(int *argc, char ***argv, ex_mpi **out, cm_error *err)
{
    (void)argc;
    (void)argv;
    *out = NULL;
    return no_mpi(err);
}

void ex_mpi_fini(ex_mpi *mp)
{
    (void)mp;
}

uint32_t ex_mpi_rank(const ex_mpi *mp)
{
    (void)mp;
    return 0;
}

uint32_t ex_mpi_size(const ex_mpi *mp)
{
    (void)mp;
    return 1;
}

const char *ex_mpi_host(const ex_mpi *mp, uint32_t rank)
{
    (void)mp;
    (void)rank;
    return "";
}

cm_status ex_mpi_bcast_text(ex_mpi *mp, char **text, size_t *len, cm_error *err)
{
    (void)mp;
    (void)text;
    (void)len;
    return no_mpi(err);
}

cm_status ex_mpi_agree(ex_mpi *mp, cm_status st, cm_error *err)
{
    (void)mp;
    (void)err;
    return st;
}

cm_status ex_mpi_check_modules(ex_mpi *mp, sp_module *part, const sp_module *ref,
                               const ex_check_opts *o, ex_report *r, ex_mpi_colls *c, cm_error *err)
{
    (void)mp;
    (void)part;
    (void)ref;
    (void)o;
    (void)c;
    memset(r, 0, sizeof *r);
    return no_mpi(err);
}

cm_status ex_mpi_colls_json(const ex_mpi *mp, const sp_module *m, const double *op_s,
                            const ex_mpi_colls *c, uint32_t n_dev, uint64_t runs, cm_buf *b)
{
    (void)mp;
    (void)m;
    (void)op_s;
    (void)c;
    (void)n_dev;
    (void)runs;
    (void)b;
    return CM_OK;
}

cm_status ex_mpi_link_measure(ex_mpi *mp, size_t bytes, uint32_t groups, ex_mpi_link *out,
                              cm_error *err)
{
    (void)mp;
    (void)bytes;
    (void)groups;
    memset(out, 0, sizeof *out);
    return no_mpi(err);
}

cm_status ex_mpi_allgather_f64(ex_mpi *mp, const double *mine, size_t n, double *all_out,
                               cm_error *err)
{
    (void)mp;
    (void)mine;
    (void)n;
    (void)all_out;
    return no_mpi(err);
}

#endif /* EX_NO_MPI */
