/* SPDX-License-Identifier: Apache-2.0
 * executor (internal): what the files behind ex_exec_run share.
 * A single-threaded preparation pass (ex_prepare.c) decodes every op of main
 * and of the blocks it runs (called functions, while/case/if regions, manual
 * computation bodies: attributes, device groups, constants) and every value's
 * per-device block (offset and local shape from its sharding) into a prog;
 * then one worker per device (ex_run.c) walks the ops in order on its own
 * buffers, every device through the same control flow, running local ops
 * (ex_ops.c) and collectives (ex_coll.c). Collectives synchronise with a
 * barrier before (every operand is ready) and after (every peer is done
 * reading), so a buffer can be freed after its last use. On sharded
 * dimensions (prepare_sharded, ex_prepare.c) a reduce or scatter leaves
 * partial results that know their reduction kind (vinfo.pkind), which the
 * all-reduce combines by, with the init value (operand) on one device of
 * each group; a slice or reshape whose result block needs elements other
 * devices hold reads them between two barriers (xop.peer_read, ex_coll.c),
 * a reshard, instead of computing from a block that lacks them. A failing
 * worker keeps taking the barriers, so the others never wait forever. Arguments,
 * comparison, partitioning and the check are ex_check.c.
 * Thread contract: a prog is only read while its workers run; shared is the
 * state of one run, which its workers synchronise on (atomics, barrier). */
#ifndef EX_INT_H
#define EX_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cm.h"
#include "ex_exec.h"
#include "ex_kern_int.h"
#include "ex_par_int.h"
#include "sp_ir.h"
#include "sp_ops.h"

/* ---- element access ---------------------------------------------------------- */

/* Reduction kinds (reduce bodies, scatter combiners, partial results). */
enum {
    RED_ADD,
    RED_MAX,
    RED_MIN,
    RED_MUL,
    RED_AND,
    RED_OR,
    RED_BODY /* StableHLO collectives: the body evaluated by the interpreter (ex_interp_fold) */
};

static inline bool elem_supported(sp_elem e)
{
    switch (e) {
#define EX_SUPPORTED_CASE(E, T, S) case E:
        EX_ELEM_TYPES(EX_SUPPORTED_CASE)
#undef EX_SUPPORTED_CASE
    case SP_ELEM_I1:
    case SP_ELEM_BF16: /* stored as 16 bits, computed in f32 (ex_kern_int.h) */
    case SP_ELEM_F16:
        return true;
    default:
        return false;
    }
}

static inline bool elem_float(sp_elem e)
{
    return e == SP_ELEM_F32 || e == SP_ELEM_F64 || e == SP_ELEM_BF16 || e == SP_ELEM_F16;
}

/* Element i of the array p of type e as a double; elem_store writes one back
 * (a C conversion, i1 as v != 0, bf16/f16 rounded to nearest even). */
static inline double elem_load(const void *p, sp_elem e, size_t i)
{
    switch (e) {
#define EX_LOAD_CASE(E, T, S)                                                                      \
    case E:                                                                                        \
        return (double)((const T *)p)[i];
        EX_ELEM_TYPES(EX_LOAD_CASE)
#undef EX_LOAD_CASE
    case SP_ELEM_I1:
        return (double)((const uint8_t *)p)[i];
    case SP_ELEM_BF16:
    case SP_ELEM_F16:
        return (double)ex_half_float(((const uint16_t *)p)[i], e == SP_ELEM_BF16);
    default:
        return 0;
    }
}

static inline void elem_store(void *p, sp_elem e, size_t i, double v)
{
    switch (e) {
#define EX_STORE_CASE(E, T, S)                                                                     \
    case E:                                                                                        \
        ((T *)p)[i] = (T)v;                                                                        \
        break;
        EX_ELEM_TYPES(EX_STORE_CASE)
#undef EX_STORE_CASE
    case SP_ELEM_I1:
        ((uint8_t *)p)[i] = v != 0;
        break;
    case SP_ELEM_BF16:
    case SP_ELEM_F16:
        ((uint16_t *)p)[i] = ex_half_from_double(e, v);
        break;
    default:
        break;
    }
}

static inline size_t count_of(const int64_t *dims, uint32_t rank)
{
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++) {
        n *= (size_t)dims[i];
    }
    return n;
}

/* Advances a row-major coordinate; false after the last one. */
static inline bool next_coord(int64_t *c, const int64_t *dims, uint32_t rank)
{
    for (uint32_t k = rank; k-- > 0;) {
        if (++c[k] < dims[k]) {
            return true;
        }
        c[k] = 0;
    }
    return false;
}

/* dst[di] += src[si] in element type e: integers wrap around in their
 * width (added as unsigned bits: a sum through doubles loses low bits past
 * 2^53 and converting an out-of-range double back is undefined), floats
 * through double, which for two f32 values rounds once, as an f32 add. */
/* The wrap-around add of elem_add for an unsigned type T of the width. */
#define EX_ADD_BITS(T)                                                                             \
    do {                                                                                           \
        T a_, b_;                                                                                  \
        memcpy(&a_, (const char *)dst + di * sizeof(T), sizeof(T));                                \
        memcpy(&b_, (const char *)src + si * sizeof(T), sizeof(T));                                \
        a_ = (T)(a_ + b_);                                                                         \
        memcpy((char *)dst + di * sizeof(T), &a_, sizeof(T));                                      \
    } while (0)

static inline void elem_add(void *dst, size_t di, const void *src, size_t si, sp_elem e)
{
    switch (e) {
    case SP_ELEM_I8:
    case SP_ELEM_UI8:
        EX_ADD_BITS(uint8_t);
        return;
    case SP_ELEM_I16:
    case SP_ELEM_UI16:
        EX_ADD_BITS(uint16_t);
        return;
    case SP_ELEM_I32:
    case SP_ELEM_UI32:
        EX_ADD_BITS(uint32_t);
        return;
    case SP_ELEM_I64:
    case SP_ELEM_UI64:
        EX_ADD_BITS(uint64_t);
        return;
    default:
        elem_store(dst, e, di, elem_load(dst, e, di) + elem_load(src, e, si));
        return;
    }
}
#undef EX_ADD_BITS

/* dst[di] = dst[di] fn src[si] in element type e (fn RED_*): add as
 * elem_add, integer products wrap around in their width, max and min keep
 * a NaN, and/or are bitwise (i1 as 0/1). */
#define EX_COMBINE_FLOAT(T)                                                                        \
    do {                                                                                           \
        T a_, b_;                                                                                  \
        memcpy(&a_, (const char *)dst + di * sizeof(T), sizeof(T));                                \
        memcpy(&b_, (const char *)src + si * sizeof(T), sizeof(T));                                \
        a_ = fn == RED_MUL   ? a_ * b_                                                             \
             : fn == RED_MAX ? (a_ > b_ || a_ != a_ ? a_ : b_)                                     \
                             : (a_ < b_ || a_ != a_ ? a_ : b_);                                    \
        memcpy((char *)dst + di * sizeof(T), &a_, sizeof(T));                                      \
    } while (0)
#define EX_COMBINE_INT(T, U)                                                                       \
    do {                                                                                           \
        T a_, b_;                                                                                  \
        memcpy(&a_, (const char *)dst + di * sizeof(T), sizeof(T));                                \
        memcpy(&b_, (const char *)src + si * sizeof(T), sizeof(T));                                \
        a_ = fn == RED_MUL   ? (T)(U)((uint64_t)(U)a_ * (uint64_t)(U)b_)                           \
             : fn == RED_MAX ? (a_ > b_ ? a_ : b_)                                                 \
             : fn == RED_MIN ? (a_ < b_ ? a_ : b_)                                                 \
             : fn == RED_AND ? (T)(a_ & b_)                                                        \
                             : (T)(a_ | b_);                                                       \
        memcpy((char *)dst + di * sizeof(T), &a_, sizeof(T));                                      \
    } while (0)

static inline void elem_combine(void *dst, size_t di, const void *src, size_t si, sp_elem e, int fn)
{
    if (fn == RED_ADD) {
        elem_add(dst, di, src, si, e);
        return;
    }
    switch (e) {
    case SP_ELEM_F32:
        EX_COMBINE_FLOAT(float);
        return;
    case SP_ELEM_F64:
        EX_COMBINE_FLOAT(double);
        return;
    case SP_ELEM_I8:
        EX_COMBINE_INT(int8_t, uint8_t);
        return;
    case SP_ELEM_I16:
        EX_COMBINE_INT(int16_t, uint16_t);
        return;
    case SP_ELEM_I32:
        EX_COMBINE_INT(int32_t, uint32_t);
        return;
    case SP_ELEM_I64:
        EX_COMBINE_INT(int64_t, uint64_t);
        return;
    case SP_ELEM_UI8:
    case SP_ELEM_I1:
        EX_COMBINE_INT(uint8_t, uint8_t);
        return;
    case SP_ELEM_UI16:
        EX_COMBINE_INT(uint16_t, uint16_t);
        return;
    case SP_ELEM_UI32:
        EX_COMBINE_INT(uint32_t, uint32_t);
        return;
    case SP_ELEM_UI64:
        EX_COMBINE_INT(uint64_t, uint64_t);
        return;
    case SP_ELEM_BF16:
    case SP_ELEM_F16: { /* in double, rounded once */
        double a_ = elem_load(dst, e, di), b_ = elem_load(src, e, si);
        a_ = fn == RED_MUL   ? a_ * b_
             : fn == RED_MAX ? (a_ > b_ || a_ != a_ ? a_ : b_)
                             : (a_ < b_ || a_ != a_ ? a_ : b_);
        elem_store(dst, e, di, a_);
        return;
    }
    default:
        return;
    }
}
#undef EX_COMBINE_FLOAT
#undef EX_COMBINE_INT

/* ---- the prepared program --------------------------------------------------- */

typedef struct vinfo {
    bool live;             /* a value of a block the workers run */
    bool is_arg;           /* main's argument (the run's input shards) */
    bool is_result;        /* returned by main: never freed by workers */
    bool checked;          /* an operand of a check op of main (prog.checks): never freed */
    bool borrowed;         /* a while condition's or a called function's argument: the
                              loop's or the caller's buffer, never freed here */
    bool inner_last;       /* its last use is inside a region of its last user */
    uint32_t home;         /* block id of the block that defines (and frees) it */
    uint32_t def_idx;      /* index of its defining op there (0 for an argument) */
    sp_elem elem;
    uint32_t rank;
    size_t esz;            /* bytes per element */
    const int64_t *gdims;  /* global dims (module-owned) */
    int64_t *ldims;        /* local dims, equal on every device */
    int64_t *off;          /* n_dev * rank block offsets */
    size_t lcount;         /* local elements */
    uint32_t last_use;     /* index in its home block of the last op using it (directly or
                              inside that op's regions) */
    int pkind;             /* RED_*: how the devices' blocks of a partial result (a reduce or
                              scatter over a sharded dimension, before its all-reduce)
                              combine; RED_ADD for any other value */
} vinfo;

enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE };

typedef struct xop {
    uint32_t op;
    sp_op_kind kind;
    const int64_t *a, *b, *c, *d; /* decoded integer attributes */
    uint32_t na, nb, nc, nd;
    int64_t dim;                  /* iota / concatenate dimension; StableHLO all_gather,
                                     reduce_scatter: its dimension; all_to_all: the split one */
    int64_t cdim;                 /* StableHLO all_to_all: the concat dimension */
    int fn;                       /* reduce body or comparison */
    int64_t *grp_of;              /* collectives: n_dev entries, row of each device */
    int64_t *groups;              /* n_groups * gsize device ids (StableHLO collectives inside
                                     a manual computation: its process groups, device d being
                                     partition d; collective_permute: n_dev entries, the
                                     source of each device or -1) */
    uint32_t gsize;
    void *cval;                   /* constant: element bytes, row-major (n_cval 1: splat) */
    void *ext;                    /* ex_gather_dims / ex_conv_dims (gather, scatter, conv) */
    size_t n_cval;
    bool local;                   /* a reshard, constraint or permute that leaves every
                                     device's block where it is: a local copy, no barrier */
    uint32_t *dead;               /* values whose buffers are released after this op */
    uint32_t n_dead;
    uint32_t *sub;                /* while: cond, body; case/if: branches; call: the callee's
                                     body (block ids) */
    uint32_t n_sub;
    uint8_t *once;                /* reduce, scatter of a partial result: per device, 1 when it
                                     starts from the init value (operand), 0 when from the
                                     identity, so the all-reduce counts it once; NULL: every
                                     device starts from it */
    bool gather_reshape;          /* reshape: the operand is held whole, each result element
                                     is read at its global position (not a block copy) */
    bool check;                   /* a check op (check.*, custom_call @check.*) of main: runs
                                     nothing, its operands are assembled after the run */
    bool peer_read;               /* slice, reshape whose result blocks need elements other
                                     devices hold: run between two barriers, each worker
                                     reading its result block from the devices' operand
                                     blocks (a reshard before the local op, ex_coll.c) */
} xop;

#define EX_MAX_NEST 64 /* regions and calls nested deeper than this are rejected */

/* A block the workers run: main's body, a called function's body, a while's
 * condition or body, a case/if branch, a manual computation's body. Its last
 * op is the terminator, which the parent op handles (flow_*, ex_run.c). */
typedef struct pblock {
    xop *ops;
    uint32_t n_ops;
    uint32_t height; /* levels of blocks run inside it */
    bool busy;       /* being prepared: a call to its function is a recursion */
    bool done;
    bool manual;     /* prepared inside an sdy.manual_computation body */
    bool spmd;       /* it or a block run inside it holds a StableHLO collective or
                        partition_id / replica_id (is_spmd_op) */
} pblock;

typedef struct prog {
    const sp_module *m;
    uint32_t block;   /* main's body */
    uint32_t n_dev;
    bool replicated;
    bool partial_inputs; /* ex_exec_opts.partial_inputs */
    vinfo *vi;        /* by value id */
    pblock *pbs;      /* by block id; prepared when ops != NULL */
    uint32_t ret;     /* op id of main's return */
    ex_gate *gate;    /* held by a worker while it computes (ex_local_run); NULL: none */
    ex_par **par;     /* by device: its pool for element-wise loops, or NULL (ex_par) */
    uint32_t n_gates; /* gate[dev % n_gates] is dev's (one per CPU with affinity) */
    cm_arena arena;
    /* preparation: the ops enclosing the one being prepared, innermost last,
     * as (block, index); a function's body starts a new scope at nest_base */
    uint32_t nest_blk[EX_MAX_NEST + 1], nest_idx[EX_MAX_NEST + 1];
    uint32_t n_nest, nest_base;
    bool in_manual; /* preparing an sdy.manual_computation body: values held whole */
    bool spmd_main; /* main is a per-process program (mhlo.num_replicas > 1 or StableHLO
                       collectives at its top level): every device runs all of it on whole
                       values, and returns its own results */
    uint32_t *checks; /* main's check ops, in order (arena) */
    uint32_t n_checks;
    uint32_t n_rep, n_part; /* the process grid of StableHLO collectives: device d is
                               replica d / n_part, partition d % n_part (manual computations:
                               1 x n_dev) */
} prog;

static inline const int64_t *voff(const prog *p, uint32_t v, uint32_t dev)
{
    return &p->vi[v].off[dev * p->vi[v].rank];
}

/* Valid extent of the block at off (the last shard of a non-divisible
 * dimension is padded). */
static inline int64_t valid_len(const vinfo *vi, uint32_t k, int64_t off)
{
    int64_t n = vi->gdims[k] - off;
    return n < 0 ? 0 : (n < vi->ldims[k] ? n : vi->ldims[k]);
}

/* A prepared sdy.manual_computation (xop.ext). The body runs once per unit:
 * on every device for its own manual group, or, in the reference run, on
 * the one worker for every manual group in turn. Each operand's and
 * result's unit offsets place the group's local tensor in the global one. */
typedef struct manual {
    uint32_t n_units;
    int64_t **in_off;  /* per operand: n_units * rank global offsets */
    int64_t **out_off; /* per result: likewise */
    bool *first;       /* per unit: the first device of its manual group */
    bool **keep;       /* per result, per unit: a first device whose result block no later
                          first device writes again (the only copies the assembly makes) */
    bool spmd;         /* the body holds StableHLO collectives or partition_id: the
                          reference run evaluates the op with the interpreter, every
                          device's body in lockstep (ex_interp_manual) */
} manual;

/* StableHLO's own collectives and process ids, which run inside an
 * sdy.manual_computation body (JAX shard_map), one body per device, or in a
 * per-process main (prog.spmd_main). */
static inline bool is_spmd_op(sp_op_kind k)
{
    return k == SP_OP_ALL_REDUCE || k == SP_OP_ALL_GATHER || k == SP_OP_REDUCE_SCATTER ||
           k == SP_OP_ALL_TO_ALL || k == SP_OP_COLLECTIVE_PERMUTE || k == SP_OP_PARTITION_ID ||
           k == SP_OP_REPLICA_ID || k == SP_OP_COLLECTIVE_BROADCAST;
}

/* Whether v's buffer is released right after op x. */
static inline bool dies_at(const xop *x, uint32_t v)
{
    for (uint32_t i = 0; i < x->n_dead; i++) {
        if (x->dead[i] == v) {
            return true;
        }
    }
    return false;
}

/* ---- workers ------------------------------------------------------------------ */

typedef struct shared {
    prog *p;
    pthread_barrier_t bar;
    atomic_int failed;
    atomic_size_t next_item; /* the running collective's next work item (ex_coll_run) */
    void **scratch;          /* per worker: NULL or COLL_ITEM bytes (ex_coll.c) */
    void **bufs;          /* n_dev * 2 * n_values: each device's buffer of every value,
                             then its spare buffers (ex_buf_zalloc) */
    void **argbufs;       /* n_dev * n_args local argument shards */
    uint32_t n_args;
    uint32_t iters;
    double *iter_s;
    double *op_s;     /* ex_exec_opts.op_s, or NULL */
    uint32_t op_from;
    void (*between)(void *ctx); /* ex_exec_run_paced */
    void *between_ctx;
    cm_error *errs;       /* per worker */
    int64_t *votes;       /* 2 * n_dev: each device's control-flow decision (flow_vote, ex_run.c) */
    uint32_t *n_votes;    /* per worker: votes taken this run */
    bool *timing;         /* per worker: this run counts in op_s (run_block, ex_run.c) */
    double *waited;       /* per worker: seconds the running op waited for the core gate */
    double *started;      /* per worker: when it left the current run's starting barrier */
    struct ex_dist *dist; /* NULL, or the run spread over processes (ex_mpi_int.h) */
    uint32_t lo, hi;      /* the devices run here: [lo, hi) (all of them without dist) */
    int64_t dvote[2];     /* with dist: the last two votes of every process (flow_vote) */
    struct ex_trace *trace; /* ex_exec_opts.trace, or NULL (ex_timing.h) */
} shared;

static inline void **wbufs(shared *sh, uint32_t dev)
{
    return &sh->bufs[(size_t)dev * 2u * sh->p->m->n_values];
}

/* A scalar index operand as int64 (saturating). */
static inline int64_t scalar_index(const prog *p, void **bufs, uint32_t v)
{
    double d = elem_load(bufs[v], p->vi[v].elem, 0);
    return d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
}

/* ---- between the files --------------------------------------------------------- */

/* ex_prepare.c: reports an error located at op ("LINE:COL" when the op came
 * from text); returns CM_EINVAL. */
cm_status ex_op_error(const prog *p, uint32_t op, cm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* ex_prepare.c: reports the error inner describes as a failure at op: inner's
 * code, the op's location as path, the message what ": " inner's message and,
 * when inner has a path, " at " that path. An out-of-memory inner stays
 * CM_ENOMEM without a path (cm_error_wrap). Returns the code recorded. */
cm_status ex_op_wrap(const prog *p, uint32_t op, cm_error *err, const cm_error *inner,
                     const char *what);

/* ex_prepare.c: prepares main of m for n_dev workers (replicated: one worker
 * holding every value whole) into p. Errors: CM_EINVAL (what cannot be
 * executed, at its op), CM_ENOMEM. p is released with ex_prog_fini, also
 * after a failure. */
cm_status ex_prog_init(prog *p, const sp_module *m, uint32_t n_dev, bool replicated,
                       bool partial_inputs, cm_error *err);
void ex_prog_fini(prog *p);

/* ex_prepare.c: whether op is a check dialect assertion (check.* or a
 * custom_call to @check.*). */
bool ex_is_check_op(const sp_module *m, uint32_t op);

/* ex_prepare.c: whether main of m is a per-process program (prog.spmd_main):
 * *at gets the first StableHLO collective or process id outside every
 * manual computation in main or a function it calls, or main itself when
 * mhlo.num_replicas is not 1; SP_NONE when not. *n_rep and *n_part get
 * mhlo.num_replicas and mhlo.num_partitions (1 when absent, 0 when not an
 * integer in 1..4096). Errors: CM_ENOMEM (no message; the caller reports). */
cm_status ex_module_spmd(const sp_module *m, uint32_t *n_rep, uint32_t *n_part, uint32_t *at);

/* ex_ops.c: buffers. A buffer of value v for one device: ex_buf_alloc reuses
 * v's spare in bufs (a worker's value array, or NULL) and zeroes it when
 * zero is set (a fresh one is always zeroed); ex_buf_zalloc is
 * ex_buf_alloc(..., true). NULL when out of memory. ex_buf_release frees
 * bufs[v], or keeps it as v's spare with keep. */
void *ex_buf_alloc(const prog *p, void **bufs, uint32_t v, bool zero);
void *ex_buf_zalloc(const prog *p, void **bufs, uint32_t v);
void ex_buf_release(const prog *p, void **bufs, uint32_t v, bool keep);

/* ex_ops.c: whether device dev's block of v has no padding. */
bool ex_is_unpadded(const prog *p, uint32_t v, uint32_t dev);

/* ex_ops.c: copies (accumulate: adds) the box of extent ext at so in src
 * (dims sd) to do_ in dst (dims dd). */
void ex_box_copy(const void *src, const int64_t *sd, const int64_t *so, void *dst,
                 const int64_t *dd, const int64_t *do_, const int64_t *ext, uint32_t rank,
                 sp_elem e, size_t esz, bool accumulate);

/* ex_ops.c: ex_op_error with x's name and what ("local shapes disagree"). */
cm_status ex_local_error(const prog *p, const xop *x, cm_error *err, const char *what);

/* ex_ops.c: runs non-collective op x on device dev, holding the core gate;
 * waited (or NULL) gets the seconds it waited for the gate added. */
cm_status ex_local_run(const prog *p, const xop *x, void **bufs, uint32_t dev, cm_error *err,
                       double *waited);

/* ex_coll.c: worker me's part of collective x, between the collective's two
 * barriers; for a peer_read op (a slice or reshape reading across devices),
 * me's own result block. */
cm_status ex_coll_run(const prog *p, const xop *x, shared *sh, uint32_t me, cm_error *err);

/* ex_check.c: the row-major coordinates of flat index idx of t, "[3, 17]". */
void ex_coords_text(const ex_tensor *t, size_t idx, char *buf, size_t len);

#endif /* EX_INT_H */
