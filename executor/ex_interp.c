/* SPDX-License-Identifier: Apache-2.0
 * executor: the StableHLO interpreter (ex_interp.h). A process (one thread)
 * holds an environment from value id to wide value (ex_interp_int.h) and
 * walks a block's ops in order; regions run through the same walker (a
 * reduce body once per element, unless it is one element-wise op, which is
 * then applied directly). interpreter.run_parallel starts one process per
 * program of its replicas x partitions grid; collectives meet at a
 * rendezvous (a barrier that fails instead of waiting forever when a peer
 * failed, finished or never comes), where each process posts its operands
 * and reads its group's. Shapes are the ops' static result types.
 * Ownership: every value is reference counted; an environment entry owns
 * one reference, released when overwritten (a loop body) or at the end. */
#include "ex_interp.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ex_interp_int.h"
#include "ex_kern_int.h"
#include "sp_attrs.h"
#include "sp_mlir.h"

#define MAX_DEPTH 64      /* nested calls and regions */
#define SYNC_TIMEOUT_S 300 /* a collective whose peers do not arrive fails after this */
#define MAX_ELEMS (1u << 26) /* elements of one value (512 MiB wide, 1 GiB complex) */

/* ---- values ------------------------------------------------------------------ */

iv *iv_new(sp_elem e, const int64_t *dims, uint32_t rank)
{
    size_t n = 1;
    for (uint32_t k = 0; k < rank; k++) {
        if (dims[k] < 0 || !cm_mul_size(n, (size_t)dims[k], &n)) {
            return NULL;
        }
    }
    uint32_t w = et_cpx(e) ? 2u : 1u;
    size_t bytes;
    if (!cm_mul_size(n, (size_t)w * 8u, &bytes) || bytes > ((size_t)1 << 40)) {
        return NULL;
    }
    iv *t = cm_calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    t->dims = cm_alloc(sizeof(int64_t) * (rank + 1u));
    t->d.p = cm_calloc(n == 0 ? 1 : n, (size_t)w * 8u);
    if (t->dims == NULL || t->d.p == NULL) {
        cm_free(t->dims);
        cm_free(t->d.p);
        cm_free(t);
        return NULL;
    }
    atomic_init(&t->refs, 1u);
    t->kind = IV_TENSOR;
    t->elem = e;
    t->rank = rank;
    if (rank > 0) {
        memcpy(t->dims, dims, sizeof(int64_t) * rank);
    }
    t->n = n;
    t->w = w;
    return t;
}

iv *iv_ref(iv *v)
{
    if (v != NULL) {
        atomic_fetch_add(&v->refs, 1u);
    }
    return v;
}

void iv_unref(iv *v)
{
    if (v == NULL || atomic_fetch_sub(&v->refs, 1u) != 1u) {
        return;
    }
    for (uint32_t i = 0; i < v->n_items; i++) {
        iv_unref(v->items[i]);
    }
    cm_free(v->items);
    cm_free(v->dims);
    cm_free(v->d.p);
    cm_free(v);
}

static iv *iv_special(iv_kind k, uint32_t n_items)
{
    iv *t = iv_new(SP_ELEM_I1, NULL, 0);
    if (t == NULL) {
        return NULL;
    }
    t->kind = k;
    t->n = 0;
    if (n_items > 0) {
        t->items = cm_calloc(n_items, sizeof(iv *));
        if (t->items == NULL) {
            iv_unref(t);
            return NULL;
        }
        t->n_items = n_items;
    }
    return t;
}

static void vals_free(iv **v, uint32_t n)
{
    if (v == NULL) {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        iv_unref(v[i]);
    }
    cm_free(v);
}

/* ---- processes and the rendezvous ------------------------------------------------- */

typedef struct irun {
    uint32_t n, n_rep, n_part;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t arrived, done;
    uint64_t gen;
    bool failed;
    iv *const **posted; /* per process: its operands at the current collective */
    uint32_t *n_posted;
    struct imsg *mail;  /* sent and not yet received (send/recv), oldest first */
    uint32_t in_recv;   /* processes waiting in a recv */
    int64_t *recv_h;    /* per process: the channel it waits on in a recv */
    bool *in_recv_p;    /* per process: whether it waits in a recv */
    const sp_attr *infeed; /* run_parallel's infeed: functions giving the queue, or NULL */
    uint32_t infeed_next;
} irun;

/* A message of stablehlo.send on channel handle. */
typedef struct imsg {
    struct imsg *next;
    int64_t handle;
    iv *v;
} imsg;

/* A value interpreter.probe recorded: the iter-th under its id. */
typedef struct iprobe {
    struct iprobe *next;
    const char *id; /* the module's string */
    uint32_t iter;
    iv *v;
} iprobe;

typedef struct ictx {
    const sp_module *m;
    FILE *out;
    FILE *results;      /* entry results and interpreter.print, or NULL */
    bool dense;         /* entry results as dense attributes */
    ex_interp_report *r;
    pthread_mutex_t mu; /* r, out and probes */
    iprobe *probes;     /* newest first */
} ictx;

typedef struct iproc {
    ictx *cx;
    irun *run;       /* NULL: the entry process, alone */
    uint32_t id;     /* replica * n_part + partition */
    uint32_t rep, part;
    iv **env;        /* by value id */
    uint8_t *busy;   /* by op id: a function being called */
    uint32_t depth;
    cm_error *err;
} iproc;

/* The processes waiting in a recv that cannot be woken by a message already
 * sent: those with no pending message on their channel (one with a message
 * is about to take it). */
static uint32_t stuck_recv(const irun *R)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < R->n && n < R->in_recv; p++) {
        if (!R->in_recv_p[p]) {
            continue;
        }
        const struct imsg *m = R->mail;
        while (m != NULL && m->handle != R->recv_h[p]) {
            m = m->next;
        }
        n += m == NULL ? 1u : 0u;
    }
    return n;
}

/* Waits for every process of R at this point. False when the run failed:
 * a process failed, the processes that finished leave the others unable to
 * meet, or nobody came for SYNC_TIMEOUT_S. */
static bool run_sync(irun *R)
{
    pthread_mutex_lock(&R->mu);
    if (R->failed) {
        pthread_mutex_unlock(&R->mu);
        return false;
    }
    uint64_t g = R->gen;
    if (++R->arrived == R->n) {
        R->arrived = 0;
        R->gen++;
        pthread_cond_broadcast(&R->cv);
        pthread_mutex_unlock(&R->mu);
        return true;
    }
    if (R->arrived + R->done + stuck_recv(R) == R->n) {
        R->failed = true;
        pthread_cond_broadcast(&R->cv);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += SYNC_TIMEOUT_S;
    while (g == R->gen && !R->failed) {
        if (pthread_cond_timedwait(&R->cv, &R->mu, &ts) == ETIMEDOUT) {
            R->failed = true;
            pthread_cond_broadcast(&R->cv);
        }
    }
    bool ok = g != R->gen;
    pthread_mutex_unlock(&R->mu);
    return ok;
}

/* Marks the process as finished (failed: the run fails). */
static void run_leave(irun *R, bool failed)
{
    pthread_mutex_lock(&R->mu);
    R->done++;
    if (failed || ((R->arrived > 0 || stuck_recv(R) > 0) &&
                   R->arrived + R->done + stuck_recv(R) == R->n)) {
        R->failed = true;
    }
    pthread_cond_broadcast(&R->cv);
    pthread_mutex_unlock(&R->mu);
}

/* ---- errors and operands ------------------------------------------------------------ */

static cm_status op_err(iproc *P, uint32_t op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static cm_status op_err(iproc *P, uint32_t op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cm_status st = sp_op_errorv(P->cx->m, op, P->err, fmt, ap);
    va_end(ap);
    return st;
}

static const sp_op *OP(iproc *P, uint32_t op)
{
    return &P->cx->m->ops[op];
}

static iv *opnd(iproc *P, uint32_t op, uint32_t i)
{
    return P->env[OP(P, op)->operands[i]];
}

static void put(iproc *P, uint32_t v, iv *t)
{
    iv_unref(P->env[v]);
    P->env[v] = t;
}

static void put_res(iproc *P, uint32_t op, uint32_t i, iv *t)
{
    put(P, OP(P, op)->first_result + i, t);
}

/* A fresh value of the type of value v: a static tensor, a token or a tuple
 * shell. */
static cm_status new_of_type(iproc *P, uint32_t op, uint32_t type, iv **out)
{
    const sp_type *t = &P->cx->m->types[type];
    *out = NULL;
    if (t->kind == SP_TYPE_TOKEN) {
        *out = iv_special(IV_TOKEN, 0);
        return *out != NULL ? CM_OK : cm_error_oom(P->err);
    }
    if (t->kind != SP_TYPE_TENSOR) {
        return op_err(P, op, "the type %s cannot be interpreted", t->text);
    }
    sp_elem elem = t->elem;
    if (elem == SP_ELEM_OTHER) {
        /* a uniform quantized type is held as its storage integer */
        cm_arena qa;
        cm_arena_init(&qa, 0);
        iquant q;
        if (ex_iquant_parse(t->text, &q, &qa)) {
            elem = q.storage;
        }
        cm_arena_fini(&qa);
    }
    if (!et_supported(elem)) {
        return op_err(P, op, "the element type of %s cannot be interpreted", t->text);
    }
    size_t n = 1;
    for (uint32_t k = 0; k < t->rank; k++) {
        if (t->dims[k] == SP_DIM_DYNAMIC) {
            return op_err(P, op, "dynamic shapes (%s) cannot be interpreted", t->text);
        }
        if (t->dims[k] < 0 || !cm_mul_size(n, (size_t)t->dims[k], &n) || n > MAX_ELEMS) {
            return op_err(P, op, "%s has more than %u elements, too many to interpret", t->text,
                          (unsigned)MAX_ELEMS);
        }
    }
    *out = iv_new(elem, t->dims, t->rank);
    return *out != NULL ? CM_OK : cm_error_oom(P->err);
}

static cm_status new_res(iproc *P, uint32_t op, uint32_t i, iv **out)
{
    const sp_module *m = P->cx->m;
    return new_of_type(P, op, m->values[OP(P, op)->first_result + i].type, out);
}

static const sp_attr *attr(iproc *P, uint32_t op, const char *name)
{
    return sp_op_attr(P->cx->m, op, name);
}

/* Integer list attribute name of op (array, dense array or dense); false
 * when absent or not integers. */
static bool ints(iproc *P, uint32_t op, const char *name, const int64_t **v, uint32_t *n,
                 cm_arena *scratch)
{
    const sp_attr *a = attr(P, op, name);
    *v = NULL;
    *n = 0;
    if (a == NULL) {
        return false;
    }
    if (a->kind == SP_ATTR_DENSE && a->u.dense.ints == NULL) {
        return false;
    }
    return sp_attr_ints(a, v, n, scratch);
}

static int64_t int_attr(iproc *P, uint32_t op, const char *name, int64_t dflt)
{
    const sp_attr *a = attr(P, op, name);
    return a != NULL && a->kind == SP_ATTR_INT ? a->u.i.v : dflt;
}

/* Scalar k of t as an index (unsigned values past INT64_MAX saturate). */
static int64_t idx_at(const iv *t, size_t k)
{
    int64_t v = t->d.i[k];
    if (t->elem == SP_ELEM_UI64 && v < 0) {
        return INT64_MAX;
    }
    return v;
}

static void strides_of(const int64_t *dims, uint32_t rank, int64_t *st)
{
    int64_t s = 1;
    for (uint32_t k = rank; k-- > 0;) {
        st[k] = s;
        s *= dims[k];
    }
}

static void coord_next(int64_t *c, const int64_t *dims, uint32_t rank)
{
    for (uint32_t k = rank; k-- > 0;) {
        if (++c[k] < dims[k]) {
            return;
        }
        c[k] = 0;
    }
}

static void copy_elem(iv *dst, size_t di, const iv *src, size_t si)
{
    memcpy((char *)dst->d.p + di * dst->w * 8u, (const char *)src->d.p + si * src->w * 8u,
           (size_t)dst->w * 8u);
}

static bool in_list(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] == x) {
            return true;
        }
    }
    return false;
}

/* ---- blocks, calls and bodies ----------------------------------------------------- */

static cm_status eval_op(iproc *P, uint32_t op);
static void print_value(ictx *cx, const iv *t, const char *type_text, const char *prefix);

/* Runs block blk with its arguments bound to args (n_args of them, which
 * must be its argument count); *res_out gets new references to the values
 * its terminator returns (*n_res of them; free with vals_free). */
static cm_status run_block(iproc *P, uint32_t blk, iv *const *args, uint32_t n_args, iv ***res_out,
                           uint32_t *n_res)
{
    const sp_module *m = P->cx->m;
    const sp_block *b = &m->blocks[blk];
    *res_out = NULL;
    *n_res = 0;
    uint32_t owner = b->parent_op != SP_NONE ? b->parent_op : 0;
    if (b->n_args != n_args) {
        return op_err(P, owner, "a region takes %u arguments, given %u", b->n_args, n_args);
    }
    if (P->depth >= MAX_DEPTH) {
        return op_err(P, owner, "regions and calls nested deeper than %d", MAX_DEPTH);
    }
    P->depth++;
    for (uint32_t i = 0; i < n_args; i++) {
        put(P, b->first_arg + i, iv_ref(args[i]));
    }
    cm_status st = CM_OK;
    uint32_t n_ops = b->n_ops;
    for (uint32_t i = 0; st == CM_OK && i + 1 < n_ops; i++) {
        st = eval_op(P, b->ops[i]);
    }
    P->depth--;
    if (st != CM_OK) {
        return st;
    }
    if (n_ops == 0) {
        return CM_OK;
    }
    const sp_op *t = &m->ops[b->ops[n_ops - 1]];
    if (t->kind != SP_OP_FUNC_RETURN && t->kind != SP_OP_RETURN && t->kind != SP_OP_SDY_RETURN) {
        /* a block that does not end in a terminator: its last op runs too */
        st = eval_op(P, b->ops[n_ops - 1]);
        return st;
    }
    iv **res = cm_calloc(t->n_operands + 1u, sizeof(iv *));
    if (res == NULL) {
        return cm_error_oom(P->err);
    }
    for (uint32_t i = 0; i < t->n_operands; i++) {
        res[i] = iv_ref(P->env[t->operands[i]]);
        if (res[i] == NULL) {
            vals_free(res, i);
            return op_err(P, b->ops[n_ops - 1], "returns a value that was never computed");
        }
    }
    *res_out = res;
    *n_res = t->n_operands;
    return CM_OK;
}

static cm_status run_region(iproc *P, uint32_t op, uint32_t ri, iv *const *args, uint32_t n_args,
                            iv ***res, uint32_t *n_res)
{
    const sp_op *o = OP(P, op);
    if (ri >= o->n_regions || o->regions[ri].n_blocks != 1) {
        return op_err(P, op, "region %u is missing or has several blocks", ri);
    }
    return run_block(P, o->regions[ri].blocks[0], args, n_args, res, n_res);
}

/* Calls function f (a func.func op) with args. */
static cm_status call_func(iproc *P, uint32_t at, uint32_t f, iv *const *args, uint32_t n_args,
                           iv ***res, uint32_t *n_res)
{
    const sp_op *fo = OP(P, f);
    if (fo->n_regions != 1 || fo->regions[0].n_blocks != 1) {
        return op_err(P, at, "calls a function without a single-block body");
    }
    if (P->busy[f]) {
        return op_err(P, at, "a recursive call cannot be interpreted");
    }
    P->busy[f] = 1;
    cm_status st = run_block(P, fo->regions[0].blocks[0], args, n_args, res, n_res);
    P->busy[f] = 0;
    return st;
}

static cm_status operands_of(iproc *P, uint32_t op, uint32_t from, uint32_t n, iv ***out)
{
    iv **v = cm_calloc(n + 1u, sizeof(iv *));
    if (v == NULL) {
        return cm_error_oom(P->err);
    }
    for (uint32_t i = 0; i < n; i++) {
        v[i] = opnd(P, op, from + i);
    }
    *out = v;
    return CM_OK;
}

/* Stores the n values res as the results of op (takes the references). */
static cm_status results_set(iproc *P, uint32_t op, iv **res, uint32_t n)
{
    if (n != OP(P, op)->n_results) {
        vals_free(res, n);
        return op_err(P, op, "its region returns %u values for %u results", n, OP(P, op)->n_results);
    }
    for (uint32_t i = 0; i < n; i++) {
        put_res(P, op, i, res[i]);
    }
    cm_free(res);
    return CM_OK;
}

/* A scalar body (reduce, scatter, sort comparator, all_reduce...): region ri
 * of op, taking n_in scalars and giving n_out. When it is one element-wise
 * op on its two arguments, it is applied without running the region. */
typedef struct rbody {
    uint32_t op, blk;
    uint32_t n_in, n_out;
    sp_op_kind fast; /* SP_OP_UNKNOWN: run the region */
    bool swap;       /* fast op on (arg1, arg0) */
    int cmp, cmpt;
    sp_elem felem;   /* the fast op's operand type */
    sp_elem relem;   /* its result type */
    iv **args;       /* n_in rank-0 values reused across calls */
} rbody;

static int cmp_dir_of(const sp_attr *a)
{
    static const char *const names[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
    if (a == NULL || a->kind != SP_ATTR_ENUM || a->u.enm.value == NULL) {
        return -1;
    }
    for (int i = 0; i < 6; i++) {
        if (strcmp(a->u.enm.value, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

static int cmp_type_of(const sp_attr *a)
{
    static const char *const names[] = {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
    if (a == NULL || a->kind != SP_ATTR_ENUM || a->u.enm.value == NULL) {
        return ICT_DEFAULT;
    }
    for (int i = 0; i < 5; i++) {
        if (strcmp(a->u.enm.value, names[i]) == 0) {
            return i;
        }
    }
    return ICT_DEFAULT;
}

static void body_fini(rbody *b)
{
    if (b->args != NULL) {
        vals_free(b->args, b->n_in);
        b->args = NULL;
    }
}

static cm_status body_init(iproc *P, uint32_t op, uint32_t ri, uint32_t n_in, uint32_t n_out,
                           rbody *b)
{
    const sp_module *m = P->cx->m;
    const sp_op *o = OP(P, op);
    memset(b, 0, sizeof *b);
    b->op = op;
    b->n_in = n_in;
    b->n_out = n_out;
    if (ri >= o->n_regions || o->regions[ri].n_blocks != 1) {
        return op_err(P, op, "region %u is missing or has several blocks", ri);
    }
    b->blk = o->regions[ri].blocks[0];
    const sp_block *bl = &m->blocks[b->blk];
    if (bl->n_args != n_in) {
        return op_err(P, op, "its body takes %u arguments, %u expected", bl->n_args, n_in);
    }
    if (n_in == 2 && n_out == 1 && bl->n_ops == 2) {
        const sp_op *f = &m->ops[bl->ops[0]], *r = &m->ops[bl->ops[1]];
        uint32_t a0 = bl->first_arg, a1 = a0 + 1;
        bool args_ok = f->n_operands == 2 && ((f->operands[0] == a0 && f->operands[1] == a1) ||
                                              (f->operands[0] == a1 && f->operands[1] == a0));
        if (args_ok && f->n_results == 1 && r->n_operands == 1 &&
            r->operands[0] == f->first_result && ex_interp_ew_known((sp_op_kind)f->kind) &&
            f->kind != SP_OP_SELECT && f->kind != SP_OP_CLAMP) {
            b->fast = (sp_op_kind)f->kind;
            b->swap = f->operands[0] == a1;
            b->felem = sp_value_type(m, a0)->elem;
            b->relem = sp_value_type(m, f->first_result)->elem;
            if (f->kind == SP_OP_COMPARE) {
                b->cmp = cmp_dir_of(sp_op_attr(m, bl->ops[0], "comparison_direction"));
                b->cmpt = cmp_type_of(sp_op_attr(m, bl->ops[0], "compare_type"));
                if (b->cmp < 0) {
                    b->fast = SP_OP_UNKNOWN;
                }
            }
        }
    }
    b->args = cm_calloc(n_in + 1u, sizeof(iv *));
    if (b->args == NULL) {
        return cm_error_oom(P->err);
    }
    for (uint32_t i = 0; i < n_in; i++) {
        cm_status st = new_of_type(P, op, m->values[bl->first_arg + i].type, &b->args[i]);
        if (st != CM_OK) {
            body_fini(b);
            return st;
        }
        if (b->args[i]->n != 1) {
            body_fini(b);
            return op_err(P, op, "its body takes arguments that are not scalars");
        }
    }
    return CM_OK;
}

/* out[0..n_out) = body(in[0..n_in)). */
static cm_status body_call(iproc *P, rbody *b, const sv *in, sv *out)
{
    if (b->fast != SP_OP_UNKNOWN) {
        sv a[2] = {b->swap ? in[1] : in[0], b->swap ? in[0] : in[1]};
        if (!ex_interp_ew(b->fast, b->felem, b->relem, a, 2, b->cmp, b->cmpt, &out[0])) {
            return op_err(P, b->op, "its body's op is not defined on %s", sp_elem_name(b->felem));
        }
        if (et_int(b->relem)) {
            out[0].i = et_wrap(b->relem, out[0].i);
        } else {
            out[0].re = et_round(b->relem, out[0].re);
            out[0].im = et_round(b->relem, out[0].im);
        }
        return CM_OK;
    }
    /* fresh argument values when the previous call's are still referenced */
    for (uint32_t i = 0; i < b->n_in; i++) {
        if (atomic_load(&b->args[i]->refs) != 1u) {
            iv *t = iv_new(b->args[i]->elem, NULL, 0);
            if (t == NULL) {
                return cm_error_oom(P->err);
            }
            iv_unref(b->args[i]);
            b->args[i] = t;
        }
        iv_set(b->args[i], 0, in[i]);
    }
    iv **res;
    uint32_t n;
    cm_status st = run_block(P, b->blk, b->args, b->n_in, &res, &n);
    if (st != CM_OK) {
        return st;
    }
    if (n != b->n_out) {
        vals_free(res, n);
        return op_err(P, b->op, "its body returns %u values, %u expected", n, b->n_out);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (res[i]->kind != IV_TENSOR || res[i]->n != 1) {
            vals_free(res, n);
            return op_err(P, b->op, "its body returns a value that is not a scalar");
        }
        out[i] = iv_get(res[i], 0);
    }
    vals_free(res, n);
    return CM_OK;
}

/* ---- constants ----------------------------------------------------------------------- */

/* The value of dense attribute a, of type type (op for errors). */
static cm_status const_value(iproc *P, uint32_t op, const sp_attr *a, uint32_t type, iv **out)
{
    *out = NULL;
    if (a == NULL || a->kind != SP_ATTR_DENSE) {
        return op_err(P, op, "has no dense value");
    }
    iv *t;
    cm_status st = new_of_type(P, op, type, &t);
    if (st != CM_OK) {
        return st;
    }
    cm_arena ar;
    cm_arena_init(&ar, 0);
    uint64_t *bits = NULL;
    size_t nb = 0;
    cm_error e2;
    cm_error_clear(&e2);
    st = sp_mlir_dense_values(P->cx->m, a, &ar, &bits, &nb, &e2);
    if (st != CM_OK) {
        cm_arena_fini(&ar);
        iv_unref(t);
        return st == CM_ENOMEM ? cm_error_oom(P->err) : op_err(P, op, "value: %s", e2.msg);
    }
    if (nb != t->n * t->w) {
        cm_arena_fini(&ar);
        iv_unref(t);
        return op_err(P, op, "value has %zu scalars for %zu elements", nb, t->n);
    }
    for (size_t k = 0; k < nb; k++) {
        if (et_int(t->elem)) {
            t->d.i[k] = et_wrap(t->elem, (int64_t)bits[k]);
        } else {
            t->d.f[k] = ex_interp_from_bits(t->elem, bits[k]);
        }
    }
    cm_arena_fini(&ar);
    *out = t;
    return CM_OK;
}

/* ---- element-wise ops ---------------------------------------------------------------- */

/* The quantization of value v's type into q (arrays in ar), or false. */
static bool value_quant(iproc *P, uint32_t v, iquant *q, cm_arena *ar)
{
    const sp_type *t = sp_value_type(P->cx->m, v);
    return t->kind == SP_TYPE_TENSOR && t->elem == SP_ELEM_OTHER && ex_iquant_parse(t->text, q, ar);
}

/* Which of q's parameters element j (row-major in dims) takes. */
static uint32_t quant_index(const iquant *q, const int64_t *dims, uint32_t rank, size_t j)
{
    if (q->qdim < 0 || (uint32_t)q->qdim >= rank) {
        return 0;
    }
    size_t inner = 1;
    for (uint32_t k = (uint32_t)q->qdim + 1u; k < rank; k++) {
        inner *= (size_t)dims[k];
    }
    size_t i = (j / inner) % (size_t)dims[q->qdim];
    return i < q->n ? (uint32_t)i : q->n - 1u;
}

/* Checks that q's parameters cover dimension qdim of a value of dims. */
static bool quant_fits(const iquant *q, const int64_t *dims, uint32_t rank)
{
    return q->qdim < 0 || ((uint32_t)q->qdim < rank && dims[q->qdim] == (int64_t)q->n);
}

/* An element-wise op with a quantized operand or result, as the spec's
 * dequantize_op_quantize: quantized operands dequantized to their
 * expressed type, the op computed there, a quantized result quantized. */
static cm_status do_ew_quant(iproc *P, uint32_t op, iv *r, const iv *const *a, bool *handled)
{
    const sp_op *o = OP(P, op);
    sp_op_kind k = (sp_op_kind)o->kind;
    cm_arena ar;
    cm_arena_init(&ar, 0);
    iquant qa[3], qr;
    bool isq[3] = {false, false, false}, rq = value_quant(P, o->first_result, &qr, &ar), any = rq;
    for (uint32_t i = 0; i < o->n_operands; i++) {
        isq[i] = value_quant(P, o->operands[i], &qa[i], &ar);
        any = any || isq[i];
    }
    *handled = any;
    if (!any) {
        cm_arena_fini(&ar);
        return CM_OK;
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < o->n_operands; i++) {
        if (isq[i] && !quant_fits(&qa[i], a[i]->dims, a[i]->rank)) {
            st = op_err(P, op, "operand %u's per-axis parameters do not fit its shape", i);
        }
    }
    if (rq && !quant_fits(&qr, r->dims, r->rank)) {
        st = op_err(P, op, "its result's per-axis parameters do not fit its shape");
    }
    uint32_t pick = k == SP_OP_SELECT ? 1u : 0u;
    sp_elem e = isq[pick] ? qa[pick].expressed : a[pick]->elem;
    sp_elem re = rq ? qr.expressed : r->elem;
    int cmp = 0, cmpt = ICT_DEFAULT;
    if (st == CM_OK && k == SP_OP_COMPARE) {
        cmp = cmp_dir_of(attr(P, op, "comparison_direction"));
        cmpt = ICT_FLOAT; /* dequantize_compare */
        if (cmp < 0) {
            st = op_err(P, op, "has no comparison_direction it can read");
        }
    }
    sv in[3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, out;
    for (size_t j = 0; st == CM_OK && j < r->n; j++) {
        for (uint32_t i = 0; i < o->n_operands; i++) {
            size_t at = a[i]->n == 1 ? 0 : j;
            in[i] = iv_get(a[i], at);
            if (isq[i]) {
                uint32_t qi = quant_index(&qa[i], a[i]->dims, a[i]->rank, at);
                in[i] = (sv){0, ex_iquant_dequantize(&qa[i], in[i].i, qi), 0};
            }
        }
        if (!ex_interp_ew(k, e, re, in, o->n_operands, cmp, cmpt, &out)) {
            st = op_err(P, op, "is not defined on %s", sp_elem_name(e));
            break;
        }
        if (rq) {
            out = (sv){ex_iquant_quantize(&qr, out.re, quant_index(&qr, r->dims, r->rank, j)), 0, 0};
        }
        iv_set(r, j, out);
    }
    cm_arena_fini(&ar);
    return st;
}

/* stablehlo.uniform_quantize (a float, or a quantized value requantized)
 * and stablehlo.uniform_dequantize. */
static cm_status do_uniform_q(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    const iv *a = opnd(P, op, 0);
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    cm_arena ar;
    cm_arena_init(&ar, 0);
    iquant qa, qr;
    bool aq = value_quant(P, o->operands[0], &qa, &ar), rq = value_quant(P, o->first_result, &qr, &ar);
    bool quantize = o->kind == SP_OP_UNIFORM_QUANTIZE;
    if ((quantize && !rq) || (!quantize && (!aq || rq)) || (!aq && !et_flt(a->elem)) ||
        a->n != r->n || (aq && !quant_fits(&qa, a->dims, a->rank)) ||
        (rq && !quant_fits(&qr, r->dims, r->rank))) {
        cm_arena_fini(&ar);
        iv_unref(r);
        return op_err(P, op, "its operand and result types are not the quantized and expressed "
                             "types it takes");
    }
    for (size_t j = 0; j < r->n; j++) {
        double x = aq ? ex_iquant_dequantize(&qa, a->d.i[j], quant_index(&qa, a->dims, a->rank, j))
                      : a->d.f[j];
        if (rq) {
            r->d.i[j] = ex_iquant_quantize(&qr, x, quant_index(&qr, r->dims, r->rank, j));
        } else {
            iv_set(r, j, (sv){0, x, 0});
        }
    }
    cm_arena_fini(&ar);
    put_res(P, op, 0, r);
    return CM_OK;
}

static cm_status do_ew(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    sp_op_kind k = (sp_op_kind)o->kind;
    if (o->n_operands < 1 || o->n_operands > 3 || o->n_results != 1) {
        return op_err(P, op, "unexpected operand or result count");
    }
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    const iv *a[3] = {NULL, NULL, NULL};
    for (uint32_t i = 0; i < o->n_operands; i++) {
        a[i] = opnd(P, op, i);
        if (a[i]->kind != IV_TENSOR || (a[i]->n != r->n && a[i]->n != 1)) {
            iv_unref(r);
            return op_err(P, op, "operand %u does not have the result's shape", i);
        }
    }
    bool handled;
    st = do_ew_quant(P, op, r, a, &handled);
    if (st != CM_OK || handled) {
        if (st != CM_OK) {
            iv_unref(r);
        } else {
            put_res(P, op, 0, r);
        }
        return st;
    }
    sp_elem e = a[k == SP_OP_SELECT ? 1 : 0]->elem;
    int cmp = 0, cmpt = ICT_DEFAULT;
    if (k == SP_OP_COMPARE) {
        cmp = cmp_dir_of(attr(P, op, "comparison_direction"));
        cmpt = cmp_type_of(attr(P, op, "compare_type"));
        if (cmp < 0) {
            iv_unref(r);
            return op_err(P, op, "has no comparison_direction it can read");
        }
    }
    sv in[3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, out;
    for (size_t j = 0; j < r->n; j++) {
        for (uint32_t i = 0; i < o->n_operands; i++) {
            in[i] = iv_get(a[i], a[i]->n == 1 ? 0 : j);
        }
        if (!ex_interp_ew(k, e, r->elem, in, o->n_operands, cmp, cmpt, &out)) {
            iv_unref(r);
            return op_err(P, op, "is not defined on %s", sp_elem_name(e));
        }
        iv_set(r, j, out);
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* ---- data movement --------------------------------------------------------------------- */

static cm_status do_iota(iproc *P, uint32_t op)
{
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    int64_t d = int_attr(P, op, "iota_dimension", -1);
    if (d < 0 || d >= (int64_t)r->rank) {
        iv_unref(r);
        return op_err(P, op, "iota_dimension is out of range");
    }
    int64_t c[SP_MAX_RANK] = {0};
    for (size_t j = 0; j < r->n; j++) {
        sv s = {c[d], 0, 0};
        iv_set(r, j, ex_interp_convert(SP_ELEM_I64, r->elem, s));
        coord_next(c, r->dims, r->rank);
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* result[c] = operand[map(c)] where map gives, per operand dim k, the
 * operand coordinate from the result coordinate: src[k] = base[k] +
 * scale[k] * c[from[k]] (from[k] < 0: base alone). */
static void gather_affine(const iv *a, iv *r, const int64_t *from, const int64_t *scale,
                          const int64_t *base)
{
    int64_t ast[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    strides_of(a->dims, a->rank, ast);
    for (size_t j = 0; j < r->n; j++) {
        int64_t si = 0;
        for (uint32_t k = 0; k < a->rank; k++) {
            int64_t x = base[k] + (from[k] >= 0 ? scale[k] * c[from[k]] : 0);
            si += x * ast[k];
        }
        copy_elem(r, j, a, (size_t)si);
        coord_next(c, r->dims, r->rank);
    }
}

static cm_status do_movement(iproc *P, uint32_t op, cm_arena *ar)
{
    const sp_op *o = OP(P, op);
    sp_op_kind k = (sp_op_kind)o->kind;
    iv *a = opnd(P, op, 0), *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    if (a->kind != IV_TENSOR || a->elem != r->elem) {
        iv_unref(r);
        return op_err(P, op, "operand and result types differ");
    }
    int64_t from[SP_MAX_RANK], scale[SP_MAX_RANK], base[SP_MAX_RANK];
    for (uint32_t i = 0; i < a->rank; i++) {
        from[i] = i;
        scale[i] = 1;
        base[i] = 0;
    }
    const int64_t *v = NULL, *v2 = NULL, *v3 = NULL;
    uint32_t n = 0, n2 = 0, n3 = 0;
    bool ok = true;
    switch (k) {
    case SP_OP_RESHAPE:
    case SP_OP_DYNAMIC_RESHAPE: /* the result type is static: the shape operand agrees */
        ok = a->n == r->n;
        if (ok) {
            memcpy(r->d.p, a->d.p, a->n * a->w * 8u);
        }
        put_res(P, op, 0, r);
        return ok ? CM_OK : op_err(P, op, "changes the element count");
    case SP_OP_BROADCAST_IN_DIM:
    case SP_OP_DYNAMIC_BROADCAST_IN_DIM:
        ok = ints(P, op, "broadcast_dimensions", &v, &n, ar) && n == a->rank;
        for (uint32_t i = 0; ok && i < n; i++) {
            ok = v[i] >= 0 && v[i] < (int64_t)r->rank &&
                 (a->dims[i] == 1 || a->dims[i] == r->dims[v[i]]);
            from[i] = ok && a->dims[i] != 1 ? v[i] : -1;
        }
        break;
    case SP_OP_BROADCAST:
        ok = r->rank >= a->rank;
        for (uint32_t i = 0; ok && i < a->rank; i++) {
            from[i] = r->rank - a->rank + i;
            ok = r->dims[from[i]] == a->dims[i];
        }
        break;
    case SP_OP_TRANSPOSE:
        ok = ints(P, op, "permutation", &v, &n, ar) && n == a->rank && r->rank == n;
        for (uint32_t i = 0; ok && i < n; i++) {
            ok = v[i] >= 0 && v[i] < (int64_t)n && r->dims[i] == a->dims[v[i]] && !in_list(v, i, v[i]);
            if (ok) {
                from[v[i]] = i;
            }
        }
        break;
    case SP_OP_SLICE:
        ok = ints(P, op, "start_indices", &v, &n, ar) && ints(P, op, "limit_indices", &v2, &n2, ar) &&
             ints(P, op, "strides", &v3, &n3, ar) && n == a->rank && n2 == n && n3 == n &&
             r->rank == n;
        for (uint32_t i = 0; ok && i < n; i++) {
            ok = v[i] >= 0 && v3[i] >= 1 && v2[i] <= a->dims[i] && v[i] <= v2[i] &&
                 r->dims[i] == (v2[i] - v[i] + v3[i] - 1) / v3[i];
            base[i] = v[i];
            scale[i] = v3[i];
        }
        break;
    case SP_OP_REVERSE:
        ok = ints(P, op, "dimensions", &v, &n, ar) && r->rank == a->rank && r->n == a->n;
        for (uint32_t i = 0; ok && i < a->rank; i++) {
            ok = r->dims[i] == a->dims[i];
        }
        for (uint32_t i = 0; ok && i < n; i++) {
            ok = v[i] >= 0 && v[i] < (int64_t)a->rank;
            if (ok) {
                base[v[i]] = a->dims[v[i]] - 1;
                scale[v[i]] = -1;
            }
        }
        break;
    default:
        ok = false;
        break;
    }
    if (!ok || (k != SP_OP_BROADCAST_IN_DIM && k != SP_OP_DYNAMIC_BROADCAST_IN_DIM &&
                k != SP_OP_BROADCAST && r->rank != a->rank)) {
        iv_unref(r);
        return op_err(P, op, "attributes that do not fit its operand");
    }
    gather_affine(a, r, from, scale, base);
    put_res(P, op, 0, r);
    return CM_OK;
}

static cm_status do_concatenate(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    int64_t d = int_attr(P, op, "dimension", -1);
    if (d < 0 || d >= (int64_t)r->rank) {
        iv_unref(r);
        return op_err(P, op, "dimension is out of range");
    }
    int64_t rst[SP_MAX_RANK];
    strides_of(r->dims, r->rank, rst);
    int64_t at = 0;
    for (uint32_t i = 0; i < o->n_operands; i++) {
        const iv *a = opnd(P, op, i);
        bool fits = a->rank == r->rank && a->elem == r->elem && at + a->dims[d] <= r->dims[d];
        for (uint32_t q = 0; fits && q < r->rank; q++) {
            fits = q == (uint32_t)d || a->dims[q] == r->dims[q];
        }
        if (!fits) {
            iv_unref(r);
            return op_err(P, op, "operand %u does not fit the result", i);
        }
        int64_t c[SP_MAX_RANK] = {0};
        for (size_t j = 0; j < a->n; j++) {
            int64_t ri = 0;
            for (uint32_t q = 0; q < r->rank; q++) {
                ri += (c[q] + (q == (uint32_t)d ? at : 0)) * rst[q];
            }
            copy_elem(r, (size_t)ri, a, j);
            coord_next(c, a->dims, a->rank);
        }
        at += a->dims[d];
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* stablehlo.pad, and dynamic_pad with its paddings as operands 2, 3, 4. */
static cm_status do_pad(iproc *P, uint32_t op, cm_arena *ar)
{
    iv *a = opnd(P, op, 0), *pv = opnd(P, op, 1), *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    const int64_t *lo, *hi, *in;
    uint32_t n1, n2, n3;
    bool ok;
    if (OP(P, op)->kind == SP_OP_DYNAMIC_PAD) {
        const iv *l = opnd(P, op, 2), *h = opnd(P, op, 3), *i = opnd(P, op, 4);
        ok = OP(P, op)->n_operands == 5 && et_int(l->elem) && et_int(h->elem) && et_int(i->elem);
        lo = l->d.i;
        hi = h->d.i;
        in = i->d.i;
        n1 = (uint32_t)l->n;
        n2 = (uint32_t)h->n;
        n3 = (uint32_t)i->n;
    } else {
        ok = ints(P, op, "edge_padding_low", &lo, &n1, ar) &&
             ints(P, op, "edge_padding_high", &hi, &n2, ar) &&
             ints(P, op, "interior_padding", &in, &n3, ar);
    }
    if (!ok || n1 != a->rank || n2 != a->rank || n3 != a->rank || r->rank != a->rank ||
        pv->n != 1) {
        iv_unref(r);
        return op_err(P, op, "padding attributes that do not fit its operand");
    }
    for (uint32_t q = 0; q < a->rank; q++) {
        if (in[q] < 0 || lo[q] + hi[q] + (a->dims[q] > 0 ? a->dims[q] + (a->dims[q] - 1) * in[q] : 0) !=
                             r->dims[q]) {
            iv_unref(r);
            return op_err(P, op, "padding that does not give the result shape");
        }
    }
    for (size_t j = 0; j < r->n; j++) {
        copy_elem(r, j, pv, 0);
    }
    int64_t rst[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    strides_of(r->dims, r->rank, rst);
    for (size_t j = 0; j < a->n; j++) {
        int64_t ri = 0;
        bool inside = true;
        for (uint32_t q = 0; q < a->rank; q++) {
            int64_t x = lo[q] + c[q] * (in[q] + 1);
            inside = inside && x >= 0 && x < r->dims[q];
            ri += x * rst[q];
        }
        if (inside) {
            copy_elem(r, (size_t)ri, a, j);
        }
        coord_next(c, a->dims, a->rank);
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static cm_status do_dynamic_slice(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    iv *a = opnd(P, op, 0), *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    if (o->n_operands != a->rank + 1u || r->rank != a->rank) {
        iv_unref(r);
        return op_err(P, op, "takes one start index per operand dimension");
    }
    int64_t from[SP_MAX_RANK], scale[SP_MAX_RANK], base[SP_MAX_RANK];
    for (uint32_t q = 0; q < a->rank; q++) {
        const iv *s = opnd(P, op, 1 + q);
        if (s->kind != IV_TENSOR || s->n != 1 || !et_int(s->elem) || r->dims[q] > a->dims[q]) {
            iv_unref(r);
            return op_err(P, op, "start indices or sizes that do not fit its operand");
        }
        from[q] = q;
        scale[q] = 1;
        base[q] = clamp64(idx_at(s, 0), 0, a->dims[q] - r->dims[q]);
    }
    gather_affine(a, r, from, scale, base);
    put_res(P, op, 0, r);
    return CM_OK;
}

static cm_status do_dynamic_update_slice(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    iv *a = opnd(P, op, 0), *u = opnd(P, op, 1), *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    bool fits = o->n_operands == a->rank + 2u && u->rank == a->rank && r->n == a->n &&
                u->elem == a->elem;
    for (uint32_t q = 0; fits && q < a->rank; q++) {
        const iv *s = opnd(P, op, 2 + q);
        fits = s->kind == IV_TENSOR && s->n == 1 && et_int(s->elem) && u->dims[q] <= a->dims[q];
    }
    if (!fits) {
        iv_unref(r);
        return op_err(P, op, "takes one start index per operand dimension");
    }
    memcpy(r->d.p, a->d.p, a->n * a->w * 8u);
    int64_t start[SP_MAX_RANK], rst[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    for (uint32_t q = 0; q < a->rank; q++) {
        start[q] = clamp64(idx_at(opnd(P, op, 2 + q), 0), 0, a->dims[q] - u->dims[q]);
    }
    strides_of(r->dims, r->rank, rst);
    for (size_t j = 0; j < u->n; j++) {
        int64_t ri = 0;
        for (uint32_t q = 0; q < u->rank; q++) {
            ri += (start[q] + c[q]) * rst[q];
        }
        copy_elem(r, (size_t)ri, u, j);
        coord_next(c, u->dims, u->rank);
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* ---- gather and scatter ----------------------------------------------------------------- */

/* Index vector of indices ix at batch coordinate b (ix's dims but
 * index_vector_dim), into sv (n_map entries). */
static bool index_vector(const iv *ix, const int64_t *b, int64_t ivd, uint32_t n_map, int64_t *out)
{
    int64_t st[SP_MAX_RANK], c[SP_MAX_RANK];
    strides_of(ix->dims, ix->rank, st);
    uint32_t q = 0;
    for (uint32_t k = 0; k < ix->rank; k++) {
        c[k] = (int64_t)k == ivd ? 0 : b[q++];
    }
    if (ivd < (int64_t)ix->rank && ix->dims[ivd] < (int64_t)n_map) {
        return false;
    }
    for (uint32_t k = 0; k < ix->rank; k++) {
        if (c[k] >= ix->dims[k]) {
            return false;
        }
    }
    for (uint32_t i = 0; i < n_map; i++) {
        if (ivd < (int64_t)ix->rank) {
            c[ivd] = i;
        }
        int64_t fi = 0;
        for (uint32_t k = 0; k < ix->rank; k++) {
            fi += c[k] * st[k];
        }
        out[i] = idx_at(ix, (size_t)fi);
    }
    return true;
}

static bool param_ints(const sp_attr *a, const char *key, const int64_t **v, uint32_t *n,
                       cm_arena *ar);

/* A list of at most SP_MAX_RANK integers copied into to; false when not. */
static bool list_copy(const int64_t *v, uint32_t n, int64_t *to, uint32_t *n_to)
{
    if (n > SP_MAX_RANK) {
        return false;
    }
    if (n > 0) {
        memcpy(to, v, sizeof(int64_t) * n);
    }
    *n_to = n;
    return true;
}

/* stablehlo.dynamic_gather's dimension numbers, read here (the planner's
 * reader takes stablehlo.gather's operands), and its slice sizes from its
 * third operand. Bounds are checked as the gather runs. */
static cm_status dynamic_gather_dims(iproc *P, uint32_t op, sp_gather_dims *g, int64_t *ss,
                                     uint32_t *nss, cm_arena *ar)
{
    const sp_attr *dn = attr(P, op, "dimension_numbers");
    const int64_t *v;
    uint32_t n;
    bool ok = OP(P, op)->n_operands == 3 && dn != NULL &&
              (dn->kind == SP_ATTR_PARAMS || dn->kind == SP_ATTR_OPAQUE);
    memset(g, 0, sizeof *g);
    ok = ok && param_ints(dn, "offset_dims", &v, &n, ar) && list_copy(v, n, g->offset, &g->n_offset);
    ok = ok && param_ints(dn, "collapsed_slice_dims", &v, &n, ar) &&
         list_copy(v, n, g->collapsed, &g->n_collapsed);
    ok = ok && param_ints(dn, "operand_batching_dims", &v, &n, ar) &&
         list_copy(v, n, g->operand_batch, &g->n_operand_batch);
    ok = ok && param_ints(dn, "start_indices_batching_dims", &v, &n, ar) &&
         list_copy(v, n, g->indices_batch, &g->n_indices_batch);
    ok = ok && param_ints(dn, "start_index_map", &v, &n, ar) &&
         list_copy(v, n, g->index_map, &g->n_index_map);
    const iv *ix = ok ? opnd(P, op, 1) : NULL, *sz = ok ? opnd(P, op, 2) : NULL;
    const iv *a = ok ? opnd(P, op, 0) : NULL;
    g->index_vector_dim = ok ? (int64_t)ix->rank : 0;
    const sp_attr *ivd =
        ok && dn->kind == SP_ATTR_PARAMS ? sp_attrs_get(dn->u.params.items, dn->u.params.n,
                                                        "index_vector_dim")
                                         : NULL;
    if (ivd != NULL && ivd->kind == SP_ATTR_INT) {
        g->index_vector_dim = ivd->u.i.v;
    }
    ok = ok && g->index_vector_dim >= 0 && g->index_vector_dim <= (int64_t)ix->rank &&
         g->n_operand_batch == g->n_indices_batch && et_int(sz->elem) && sz->n == a->rank;
    for (uint32_t i = 0; ok && i < g->n_index_map; i++) {
        ok = g->index_map[i] >= 0 && g->index_map[i] < (int64_t)a->rank;
    }
    for (uint32_t i = 0; ok && i < g->n_operand_batch; i++) {
        ok = g->operand_batch[i] >= 0 && g->operand_batch[i] < (int64_t)a->rank &&
             g->indices_batch[i] >= 0 && g->indices_batch[i] < (int64_t)ix->rank;
    }
    for (uint32_t i = 0; ok && i < g->n_offset; i++) {
        ok = g->offset[i] >= 0 && g->offset[i] < SP_MAX_RANK;
    }
    for (uint32_t d = 0; ok && d < a->rank; d++) {
        ss[d] = sz->d.i[d];
        ok = ss[d] >= 0 && ss[d] <= a->dims[d];
    }
    if (!ok) {
        return op_err(P, op, "dimension numbers or slice sizes that do not fit its operands");
    }
    *nss = a->rank;
    return CM_OK;
}

static cm_status do_gather(iproc *P, uint32_t op, cm_arena *ar)
{
    const sp_module *m = P->cx->m;
    sp_gather_dims g;
    int64_t ss[SP_MAX_RANK];
    uint32_t nss = 0;
    cm_status st;
    if (OP(P, op)->kind == SP_OP_DYNAMIC_GATHER) {
        st = dynamic_gather_dims(P, op, &g, ss, &nss, ar);
    } else {
        st = sp_gather_dims_get(m, op, &g, P->err);
        if (st == CM_OK) {
            st = sp_gather_slice_sizes_get(m, op, ss, &nss, P->err);
        }
    }
    if (st != CM_OK) {
        return st;
    }
    iv *a = opnd(P, op, 0), *ix = opnd(P, op, 1), *r;
    st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    /* operand dims the offsets run over, in order */
    int64_t wdim[SP_MAX_RANK];
    uint32_t nw = 0;
    for (uint32_t d = 0; d < a->rank; d++) {
        if (!in_list(g.collapsed, g.n_collapsed, d) &&
            !in_list(g.operand_batch, g.n_operand_batch, d)) {
            wdim[nw++] = d;
        }
    }
    if (nw != g.n_offset || nss != a->rank) {
        iv_unref(r);
        return op_err(P, op, "dimension numbers that do not fit its operand");
    }
    int64_t ast[SP_MAX_RANK], c[SP_MAX_RANK] = {0}, b[SP_MAX_RANK] = {0}, sidx[SP_MAX_RANK];
    strides_of(a->dims, a->rank, ast);
    for (size_t j = 0; j < r->n; j++) {
        uint32_t nb = 0;
        for (uint32_t q = 0; q < r->rank; q++) {
            if (!in_list(g.offset, g.n_offset, q)) {
                b[nb++] = c[q];
            }
        }
        if (!index_vector(ix, b, g.index_vector_dim, g.n_index_map, sidx)) {
            iv_unref(r);
            return op_err(P, op, "its result needs indices its start_indices do not hold");
        }
        int64_t pos[SP_MAX_RANK] = {0};
        for (uint32_t i = 0; i < g.n_index_map; i++) {
            int64_t d = g.index_map[i];
            pos[d] = clamp64(sidx[i], 0, a->dims[d] - ss[d]);
        }
        for (uint32_t i = 0; i < g.n_operand_batch; i++) {
            int64_t sd = g.indices_batch[i];
            int64_t bq = sd < g.index_vector_dim ? sd : sd - 1;
            pos[g.operand_batch[i]] += b[bq];
        }
        for (uint32_t i = 0; i < nw; i++) {
            pos[wdim[i]] += c[g.offset[i]];
        }
        int64_t si = 0;
        for (uint32_t d = 0; d < a->rank; d++) {
            if (pos[d] < 0 || pos[d] >= a->dims[d]) {
                iv_unref(r);
                return op_err(P, op, "its result reads past its operand");
            }
            si += pos[d] * ast[d];
        }
        copy_elem(r, j, a, (size_t)si);
        coord_next(c, r->dims, r->rank);
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

static cm_status do_scatter(iproc *P, uint32_t op)
{
    const sp_module *m = P->cx->m;
    const sp_op *o = OP(P, op);
    sp_gather_dims g;
    cm_status st = sp_gather_dims_get(m, op, &g, P->err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t nin = (o->n_operands - 1u) / 2u;
    if (o->n_operands != 2u * nin + 1u || o->n_results != nin || nin == 0 || nin > 16) {
        return op_err(P, op, "unexpected operand or result count");
    }
    const iv *ix = opnd(P, op, nin);
    iv *res[16] = {NULL};
    for (uint32_t i = 0; i < nin; i++) {
        const iv *a = opnd(P, op, i);
        res[i] = iv_new(a->elem, a->dims, a->rank);
        if (res[i] == NULL) {
            for (uint32_t q = 0; q < i; q++) {
                iv_unref(res[q]);
            }
            return cm_error_oom(P->err);
        }
        memcpy(res[i]->d.p, a->d.p, a->n * a->w * 8u);
    }
    rbody body;
    st = body_init(P, op, 0, 2 * nin, nin, &body);
    const iv *u0 = opnd(P, op, nin + 1);
    const iv *a0 = res[0];
    int64_t wdim[SP_MAX_RANK];
    uint32_t nw = 0;
    for (uint32_t d = 0; d < a0->rank; d++) {
        if (!in_list(g.collapsed, g.n_collapsed, d) &&
            !in_list(g.operand_batch, g.n_operand_batch, d)) {
            wdim[nw++] = d;
        }
    }
    if (st == CM_OK && nw != g.n_offset) {
        st = op_err(P, op, "dimension numbers that do not fit its operand");
    }
    for (uint32_t i = 0; st == CM_OK && i < nin; i++) {
        if (opnd(P, op, nin + 1 + i)->n != u0->n || opnd(P, op, i)->n != a0->n ||
            OP(P, op)->n_results != nin) {
            st = op_err(P, op, "inputs or updates of different shapes");
        }
    }
    int64_t ast[SP_MAX_RANK], c[SP_MAX_RANK] = {0}, b[SP_MAX_RANK] = {0}, sidx[SP_MAX_RANK];
    strides_of(a0->dims, a0->rank, ast);
    sv in[32], out[16];
    for (size_t j = 0; st == CM_OK && j < u0->n; j++) {
        uint32_t nb = 0;
        for (uint32_t q = 0; q < u0->rank; q++) {
            if (!in_list(g.offset, g.n_offset, q)) {
                b[nb++] = c[q];
            }
        }
        if (!index_vector(ix, b, g.index_vector_dim, g.n_index_map, sidx)) {
            st = op_err(P, op, "its updates need indices its scatter_indices do not hold");
            break;
        }
        int64_t pos[SP_MAX_RANK] = {0};
        for (uint32_t i = 0; i < g.n_index_map; i++) {
            pos[g.index_map[i]] = sidx[i];
        }
        for (uint32_t i = 0; i < g.n_operand_batch; i++) {
            int64_t sd = g.indices_batch[i];
            int64_t bq = sd < g.index_vector_dim ? sd : sd - 1;
            pos[g.operand_batch[i]] += b[bq];
        }
        for (uint32_t i = 0; i < nw; i++) {
            pos[wdim[i]] += c[g.offset[i]];
        }
        bool inside = true;
        int64_t ri = 0;
        for (uint32_t d = 0; d < a0->rank; d++) {
            inside = inside && pos[d] >= 0 && pos[d] < a0->dims[d];
            ri += pos[d] * ast[d];
        }
        if (inside) {
            for (uint32_t i = 0; i < nin; i++) {
                in[i] = iv_get(res[i], (size_t)ri);
                in[nin + i] = iv_get(opnd(P, op, nin + 1 + i), j);
            }
            st = body_call(P, &body, in, out);
            for (uint32_t i = 0; st == CM_OK && i < nin; i++) {
                iv_set(res[i], (size_t)ri, out[i]);
            }
        }
        coord_next(c, u0->dims, u0->rank);
    }
    body_fini(&body);
    for (uint32_t i = 0; i < nin; i++) {
        if (st == CM_OK) {
            put_res(P, op, i, res[i]);
        } else {
            iv_unref(res[i]);
        }
    }
    return st;
}

/* ---- reductions ---------------------------------------------------------------------------- */

static cm_status do_reduce(iproc *P, uint32_t op, cm_arena *ar)
{
    const sp_op *o = OP(P, op);
    uint32_t nin = o->n_operands / 2u;
    if (o->n_operands != 2u * nin || o->n_results != nin || nin == 0 || nin > 16) {
        return op_err(P, op, "unexpected operand or result count");
    }
    const int64_t *dims;
    uint32_t nd;
    if (!ints(P, op, "dimensions", &dims, &nd, ar)) {
        return op_err(P, op, "has no dimensions it can read");
    }
    const iv *a0 = opnd(P, op, 0);
    iv *res[16] = {NULL};
    cm_status st = CM_OK;
    for (uint32_t i = 0; st == CM_OK && i < nin; i++) {
        st = new_res(P, op, i, &res[i]);
        if (st == CM_OK) {
            const iv *init = opnd(P, op, nin + i);
            if (init->n != 1 || opnd(P, op, i)->n != a0->n) {
                st = op_err(P, op, "operands or init values of unexpected shapes");
            }
            for (size_t j = 0; st == CM_OK && j < res[i]->n; j++) {
                copy_elem(res[i], j, init, 0);
            }
        }
    }
    rbody body;
    memset(&body, 0, sizeof body);
    if (st == CM_OK) {
        st = body_init(P, op, 0, 2 * nin, nin, &body);
    }
    int64_t rst[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    if (st == CM_OK) {
        strides_of(res[0]->dims, res[0]->rank, rst);
        if (res[0]->rank + nd != a0->rank) {
            st = op_err(P, op, "result rank does not match the reduced dimensions");
        }
        uint32_t q = 0;
        for (uint32_t k = 0; st == CM_OK && k < a0->rank; k++) {
            if (!in_list(dims, nd, k) && (q >= res[0]->rank || res[0]->dims[q++] != a0->dims[k])) {
                st = op_err(P, op, "result shape does not match the kept dimensions");
            }
        }
        for (uint32_t i = 1; st == CM_OK && i < nin; i++) {
            if (res[i]->n != res[0]->n) {
                st = op_err(P, op, "results of different shapes");
            }
        }
    }
    sv in[32], out[16];
    for (size_t j = 0; st == CM_OK && j < a0->n; j++) {
        int64_t ri = 0;
        uint32_t q = 0;
        for (uint32_t k = 0; k < a0->rank; k++) {
            if (!in_list(dims, nd, k)) {
                ri += c[k] * rst[q++];
            }
        }
        for (uint32_t i = 0; i < nin; i++) {
            in[i] = iv_get(res[i], (size_t)ri);
            in[nin + i] = iv_get(opnd(P, op, i), j);
        }
        st = body_call(P, &body, in, out);
        for (uint32_t i = 0; st == CM_OK && i < nin; i++) {
            iv_set(res[i], (size_t)ri, out[i]);
        }
        coord_next(c, a0->dims, a0->rank);
    }
    body_fini(&body);
    for (uint32_t i = 0; i < nin; i++) {
        if (st == CM_OK) {
            put_res(P, op, i, res[i]);
        } else {
            iv_unref(res[i]);
        }
    }
    return st;
}

static cm_status do_reduce_window(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    uint32_t nin = o->n_operands / 2u;
    if (o->n_operands != 2u * nin || o->n_results != nin || nin == 0 || nin > 16) {
        return op_err(P, op, "unexpected operand or result count");
    }
    sp_window w;
    cm_status st = sp_window_get(P->cx->m, op, &w, P->err);
    if (st != CM_OK) {
        return st;
    }
    const iv *a0 = opnd(P, op, 0);
    uint32_t rank = a0->rank;
    if (w.n_dims != rank) {
        return op_err(P, op, "window_dimensions does not fit the operand");
    }
    iv *res[16] = {NULL};
    for (uint32_t i = 0; st == CM_OK && i < nin; i++) {
        st = new_res(P, op, i, &res[i]);
        if (st == CM_OK && (res[i]->rank != rank || res[i]->n != res[0]->n ||
                            opnd(P, op, i)->n != a0->n || opnd(P, op, nin + i)->n != 1)) {
            st = op_err(P, op, "operands, init values or results of unexpected shapes");
        }
    }
    rbody body;
    memset(&body, 0, sizeof body);
    if (st == CM_OK) {
        st = body_init(P, op, 0, 2 * nin, nin, &body);
    }
    int64_t ast[SP_MAX_RANK], wc[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    strides_of(a0->dims, rank, ast);
    size_t wn = 1;
    for (uint32_t k = 0; k < rank; k++) {
        wn *= (size_t)w.dims[k];
    }
    sv in[32], out[16];
    for (size_t j = 0; st == CM_OK && j < res[0]->n; j++) {
        for (uint32_t i = 0; i < nin; i++) {
            in[i] = iv_get(opnd(P, op, nin + i), 0);
        }
        memset(wc, 0, sizeof(int64_t) * rank);
        for (size_t t = 0; st == CM_OK && t < wn; t++) {
            int64_t ai = 0;
            bool inside = true;
            for (uint32_t k = 0; k < rank && inside; k++) {
                int64_t s = w.n_strides ? w.strides[k] : 1;
                int64_t bd = w.n_base_dilations ? w.base_dilations[k] : 1;
                int64_t wd = w.n_window_dilations ? w.window_dilations[k] : 1;
                int64_t lo = w.n_padding ? w.padding[2 * k] : 0;
                int64_t p = c[k] * s + wc[k] * wd - lo;
                inside = p >= 0 && p % bd == 0 && p / bd < a0->dims[k];
                ai += (p / bd) * ast[k];
            }
            if (inside) {
                for (uint32_t i = 0; i < nin; i++) {
                    in[nin + i] = iv_get(opnd(P, op, i), (size_t)ai);
                }
                st = body_call(P, &body, in, out);
                for (uint32_t i = 0; i < nin; i++) {
                    in[i] = out[i];
                }
            }
            coord_next(wc, w.dims, rank);
        }
        for (uint32_t i = 0; st == CM_OK && i < nin; i++) {
            iv_set(res[i], j, in[i]);
        }
        coord_next(c, res[0]->dims, rank);
    }
    body_fini(&body);
    for (uint32_t i = 0; i < nin; i++) {
        if (st == CM_OK) {
            put_res(P, op, i, res[i]);
        } else {
            iv_unref(res[i]);
        }
    }
    return st;
}

static cm_status do_select_and_scatter(iproc *P, uint32_t op)
{
    sp_window w;
    cm_status st = sp_window_get(P->cx->m, op, &w, P->err);
    if (st != CM_OK) {
        return st;
    }
    const iv *a = opnd(P, op, 0), *src = opnd(P, op, 1), *init = opnd(P, op, 2);
    uint32_t rank = a->rank;
    if (w.n_dims != rank || src->rank != rank || init->n != 1) {
        return op_err(P, op, "window or operands that do not fit");
    }
    iv *r;
    st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    if (r->n != a->n) {
        iv_unref(r);
        return op_err(P, op, "its result does not have its operand's shape");
    }
    for (size_t j = 0; j < r->n; j++) {
        copy_elem(r, j, init, 0);
    }
    rbody sel, sca;
    memset(&sca, 0, sizeof sca);
    st = body_init(P, op, 0, 2, 1, &sel);
    if (st == CM_OK) {
        st = body_init(P, op, 1, 2, 1, &sca);
    }
    int64_t ast[SP_MAX_RANK], wc[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    strides_of(a->dims, rank, ast);
    size_t wn = 1;
    for (uint32_t k = 0; k < rank; k++) {
        wn *= (size_t)w.dims[k];
    }
    for (size_t j = 0; st == CM_OK && j < src->n; j++) {
        memset(wc, 0, sizeof(int64_t) * rank);
        int64_t pick = -1;
        for (size_t t = 0; st == CM_OK && t < wn; t++) {
            int64_t ai = 0;
            bool inside = true;
            for (uint32_t k = 0; k < rank && inside; k++) {
                int64_t s = w.n_strides ? w.strides[k] : 1;
                int64_t lo = w.n_padding ? w.padding[2 * k] : 0;
                int64_t p = c[k] * s + wc[k] - lo;
                inside = p >= 0 && p < a->dims[k];
                ai += p * ast[k];
            }
            if (inside) {
                if (pick < 0) {
                    pick = ai;
                } else {
                    sv in[2] = {iv_get(a, (size_t)pick), iv_get(a, (size_t)ai)}, out;
                    st = body_call(P, &sel, in, &out);
                    if (st == CM_OK && out.i == 0) {
                        pick = ai;
                    }
                }
            }
            coord_next(wc, w.dims, rank);
        }
        if (st == CM_OK && pick >= 0) {
            sv in[2] = {iv_get(r, (size_t)pick), iv_get(src, j)}, out;
            st = body_call(P, &sca, in, &out);
            if (st == CM_OK) {
                iv_set(r, (size_t)pick, out);
            }
        }
        coord_next(c, src->dims, rank);
    }
    body_fini(&sel);
    body_fini(&sca);
    if (st != CM_OK) {
        iv_unref(r);
        return st;
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* ---- sort ------------------------------------------------------------------------------------ */

typedef struct sort_ctx {
    iproc *P;
    rbody *body;
    iv *const *in;
    uint32_t n_in;
    cm_status st;
} sort_ctx;

/* Whether element x sorts before y (the comparator on the slices' flat
 * positions). */
static bool sort_less(sort_ctx *s, size_t x, size_t y)
{
    if (s->st != CM_OK) {
        return false;
    }
    sv in[32], out;
    for (uint32_t i = 0; i < s->n_in; i++) {
        in[2 * i] = iv_get(s->in[i], x);
        in[2 * i + 1] = iv_get(s->in[i], y);
    }
    s->st = body_call(s->P, s->body, in, &out);
    return s->st == CM_OK && out.i != 0;
}

static void merge_sort(sort_ctx *s, size_t *v, size_t *tmp, size_t n)
{
    if (n < 2) {
        return;
    }
    size_t h = n / 2;
    merge_sort(s, v, tmp, h);
    merge_sort(s, v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        /* stable: the right one first only when strictly less */
        if (sort_less(s, v[j], v[i])) {
            tmp[k++] = v[j++];
        } else {
            tmp[k++] = v[i++];
        }
    }
    while (i < h) {
        tmp[k++] = v[i++];
    }
    while (j < n) {
        tmp[k++] = v[j++];
    }
    memcpy(v, tmp, n * sizeof *v);
}

static cm_status do_sort(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    uint32_t nin = o->n_operands;
    if (nin == 0 || nin > 16 || o->n_results != nin) {
        return op_err(P, op, "unexpected operand or result count");
    }
    iv **in;
    cm_status st = operands_of(P, op, 0, nin, &in);
    if (st != CM_OK) {
        return st;
    }
    const iv *a0 = in[0];
    int64_t dim = int_attr(P, op, "dimension", -1);
    if (dim < 0) {
        dim += (int64_t)a0->rank;
    }
    if (dim < 0 || dim >= (int64_t)a0->rank) {
        cm_free(in);
        return op_err(P, op, "dimension is out of range");
    }
    rbody body;
    st = body_init(P, op, 0, 2 * nin, 1, &body);
    iv *res[16] = {NULL};
    for (uint32_t i = 0; st == CM_OK && i < nin; i++) {
        st = new_res(P, op, i, &res[i]);
        if (st == CM_OK && (in[i]->n != a0->n || res[i]->n != a0->n)) {
            st = op_err(P, op, "operands of different shapes");
        }
    }
    int64_t L = a0->dims[dim], ast[SP_MAX_RANK];
    strides_of(a0->dims, a0->rank, ast);
    size_t *idx = cm_calloc((size_t)L + 1u, sizeof(size_t));
    size_t *tmp = cm_calloc((size_t)L + 1u, sizeof(size_t));
    if (st == CM_OK && (idx == NULL || tmp == NULL)) {
        st = cm_error_oom(P->err);
    }
    sort_ctx sc = {P, &body, in, nin, CM_OK};
    size_t n_slices = L == 0 ? 0 : a0->n / (size_t)L;
    int64_t c[SP_MAX_RANK] = {0}, sdims[SP_MAX_RANK];
    memcpy(sdims, a0->dims, sizeof(int64_t) * a0->rank);
    sdims[dim] = 1;
    for (size_t s = 0; st == CM_OK && s < n_slices; s++) {
        int64_t b0 = 0;
        for (uint32_t k = 0; k < a0->rank; k++) {
            b0 += c[k] * ast[k];
        }
        for (int64_t t = 0; t < L; t++) {
            idx[t] = (size_t)(b0 + t * ast[dim]);
        }
        merge_sort(&sc, idx, tmp, (size_t)L);
        st = sc.st;
        for (int64_t t = 0; st == CM_OK && t < L; t++) {
            for (uint32_t i = 0; i < nin; i++) {
                copy_elem(res[i], (size_t)(b0 + t * ast[dim]), in[i], idx[t]);
            }
        }
        coord_next(c, sdims, a0->rank);
    }
    cm_free(idx);
    cm_free(tmp);
    cm_free(in);
    body_fini(&body);
    for (uint32_t i = 0; i < nin; i++) {
        if (st == CM_OK) {
            put_res(P, op, i, res[i]);
        } else {
            iv_unref(res[i]);
        }
    }
    return st;
}

static cm_status do_map(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    uint32_t nin = o->n_operands;
    if (nin > 16 || o->n_results != 1) {
        return op_err(P, op, "unexpected operand or result count");
    }
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < nin; i++) {
        if (opnd(P, op, i)->n != r->n) {
            iv_unref(r);
            return op_err(P, op, "operands of other shapes than its result");
        }
    }
    rbody body;
    st = body_init(P, op, 0, nin, 1, &body);
    sv in[16], out;
    for (size_t j = 0; st == CM_OK && j < r->n; j++) {
        for (uint32_t i = 0; i < nin; i++) {
            in[i] = iv_get(opnd(P, op, i), j);
        }
        st = body_call(P, &body, in, &out);
        if (st == CM_OK) {
            iv_set(r, j, out);
        }
    }
    body_fini(&body);
    if (st != CM_OK) {
        iv_unref(r);
        return st;
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* ---- dot_general and convolution --------------------------------------------------------- */

/* acc + x * y in type e, each step rounded (wrapped) as the type computes it,
 * which is how StableHLO's reference sums a product (dot_general,
 * convolution): the order of the sum is the contraction's row-major order. */
static sv mul_add(sp_elem e, sv acc, sv x, sv y)
{
    sv r = {0, 0, 0};
    if (et_int(e)) {
        r.i = et_wrap(e, (int64_t)((uint64_t)acc.i + (uint64_t)x.i * (uint64_t)y.i));
        if (e == SP_ELEM_I1) {
            r.i = acc.i | (x.i & y.i);
        }
    } else if (et_cpx(e)) {
        double pr = et_round(e, x.re * y.re - x.im * y.im), pi = et_round(e, x.re * y.im + x.im * y.re);
        r.re = et_round(e, acc.re + pr);
        r.im = et_round(e, acc.im + pi);
    } else {
        r.re = et_round(e, acc.re + et_round(e, x.re * y.re));
    }
    return r;
}

/* dot_general (and dot): result dims are the batch dims, then lhs's free
 * dims, then rhs's; integer results go through the executor's integer
 * kernel (exact in any order), the others through mul_add in order. */
static cm_status do_dot(iproc *P, uint32_t op)
{
    sp_dot_dims dd;
    cm_status st = sp_dot_dims_get(P->cx->m, op, &dd, P->err);
    if (st != CM_OK) {
        return st;
    }
    const iv *l = opnd(P, op, 0), *rr = opnd(P, op, 1);
    iv *r;
    st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    int64_t lst[SP_MAX_RANK], rst[SP_MAX_RANK], lfree[SP_MAX_RANK], rfree[SP_MAX_RANK];
    uint32_t nlf = 0, nrf = 0;
    strides_of(l->dims, l->rank, lst);
    strides_of(rr->dims, rr->rank, rst);
    for (uint32_t k = 0; k < l->rank; k++) {
        if (!in_list(dd.lhs_batch, dd.n_batch, k) && !in_list(dd.lhs_contract, dd.n_contract, k)) {
            lfree[nlf++] = k;
        }
    }
    for (uint32_t k = 0; k < rr->rank; k++) {
        if (!in_list(dd.rhs_batch, dd.n_batch, k) && !in_list(dd.rhs_contract, dd.n_contract, k)) {
            rfree[nrf++] = k;
        }
    }
    bool fits = r->rank == dd.n_batch + nlf + nrf;
    for (uint32_t i = 0; fits && i < dd.n_batch; i++) {
        fits = r->dims[i] == l->dims[dd.lhs_batch[i]] && r->dims[i] == rr->dims[dd.rhs_batch[i]];
    }
    for (uint32_t i = 0; fits && i < nlf; i++) {
        fits = r->dims[dd.n_batch + i] == l->dims[lfree[i]];
    }
    for (uint32_t i = 0; fits && i < nrf; i++) {
        fits = r->dims[dd.n_batch + nlf + i] == rr->dims[rfree[i]];
    }
    for (uint32_t i = 0; fits && i < dd.n_contract; i++) {
        fits = l->dims[dd.lhs_contract[i]] == rr->dims[dd.rhs_contract[i]];
    }
    if (!fits) {
        iv_unref(r);
        return op_err(P, op, "result shape does not match its dimension numbers");
    }
    if (et_int(r->elem) && et_int(l->elem) && et_int(rr->elem) && l->rank <= EX_KERN_MAX_RANK &&
        rr->rank <= EX_KERN_MAX_RANK && l->n <= INT32_MAX && rr->n <= INT32_MAX &&
        r->n <= INT32_MAX && r->elem != SP_ELEM_I1) {
        st = ex_kern_dot_int(SP_ELEM_I64, l->d.p, l->dims, l->rank, SP_ELEM_I64, rr->d.p, rr->dims,
                             rr->rank, dd.lhs_batch, dd.rhs_batch, dd.n_batch, dd.lhs_contract,
                             dd.rhs_contract, dd.n_contract, SP_ELEM_I64, r->d.p);
        for (size_t j = 0; j < r->n; j++) {
            r->d.i[j] = et_wrap(r->elem, r->d.i[j]);
        }
        if (st != CM_OK) {
            iv_unref(r);
            return st == CM_ENOMEM ? cm_error_oom(P->err) : op_err(P, op, "the kernel refused it");
        }
        put_res(P, op, 0, r);
        return CM_OK;
    }
    int64_t cdims[SP_MAX_RANK], cc[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    size_t cn = 1;
    for (uint32_t i = 0; i < dd.n_contract; i++) {
        cdims[i] = l->dims[dd.lhs_contract[i]];
        cn *= (size_t)cdims[i];
    }
    for (size_t j = 0; j < r->n; j++) {
        int64_t lo = 0, ro = 0;
        for (uint32_t i = 0; i < dd.n_batch; i++) {
            lo += c[i] * lst[dd.lhs_batch[i]];
            ro += c[i] * rst[dd.rhs_batch[i]];
        }
        for (uint32_t i = 0; i < nlf; i++) {
            lo += c[dd.n_batch + i] * lst[lfree[i]];
        }
        for (uint32_t i = 0; i < nrf; i++) {
            ro += c[dd.n_batch + nlf + i] * rst[rfree[i]];
        }
        memset(cc, 0, sizeof(int64_t) * dd.n_contract);
        sv acc = {0, 0, 0};
        for (size_t t = 0; t < cn; t++) {
            int64_t li = lo, ri = ro;
            for (uint32_t i = 0; i < dd.n_contract; i++) {
                li += cc[i] * lst[dd.lhs_contract[i]];
                ri += cc[i] * rst[dd.rhs_contract[i]];
            }
            sv x = ex_interp_convert(l->elem, r->elem, iv_get(l, (size_t)li));
            sv y = ex_interp_convert(rr->elem, r->elem, iv_get(rr, (size_t)ri));
            acc = mul_add(r->elem, acc, x, y);
            coord_next(cc, cdims, dd.n_contract);
        }
        iv_set(r, j, acc);
        coord_next(c, r->dims, r->rank);
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* The integer list key of attribute a, `#dialect.name<key = [1, 2], ...>`
 * parsed or kept verbatim (absent: empty); false when malformed. */
static bool param_ints(const sp_attr *a, const char *key, const int64_t **v, uint32_t *n,
                       cm_arena *ar)
{
    *v = NULL;
    *n = 0;
    if (a->kind == SP_ATTR_PARAMS) {
        const sp_attr *x = sp_attrs_get(a->u.params.items, a->u.params.n, key);
        return x == NULL || sp_attr_ints(x, v, n, ar);
    }
    if (a->kind != SP_ATTR_OPAQUE || a->u.opaque.text == NULL) {
        return false;
    }
    size_t kl = strlen(key);
    const char *p = a->u.opaque.text;
    for (;;) {
        p = strstr(p, key);
        if (p == NULL) {
            return true;
        }
        bool word = (p == a->u.opaque.text || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'))) &&
                    !(p[kl] == '_' || (p[kl] >= 'a' && p[kl] <= 'z'));
        p += kl;
        if (word) {
            break;
        }
    }
    while (*p == ' ' || *p == '\n' || *p == '=') {
        p++;
    }
    if (*p++ != '[') {
        return false;
    }
    int64_t *out = cm_arena_alloc(ar, sizeof(int64_t) * SP_MAX_RANK);
    if (out == NULL) {
        return false;
    }
    uint32_t k = 0;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == ',') {
            p++;
        }
        if (*p == ']') {
            break;
        }
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p || k >= SP_MAX_RANK) {
            return false;
        }
        out[k++] = x;
        p = end;
    }
    *v = out;
    *n = k;
    return true;
}

/* chlo.ragged_dot with the ragged dimension a non-contracting lhs dimension
 * (mode 1): lhs rows of group g (group_sizes, consecutive along the ragged
 * dimension) multiply rhs's group g; rows past every group give zeros. */
static cm_status do_ragged_dot(iproc *P, uint32_t op, cm_arena *ar)
{
    const sp_attr *dn = attr(P, op, "ragged_dot_dimension_numbers");
    const int64_t *lb, *rb, *lc, *rc, *lr, *rg;
    uint32_t nlb, nrb, nlc, nrc, nlr, nrg;
    if (OP(P, op)->n_operands != 3 || dn == NULL ||
        !param_ints(dn, "lhs_batching_dimensions", &lb, &nlb, ar) ||
        !param_ints(dn, "rhs_batching_dimensions", &rb, &nrb, ar) ||
        !param_ints(dn, "lhs_contracting_dimensions", &lc, &nlc, ar) ||
        !param_ints(dn, "rhs_contracting_dimensions", &rc, &nrc, ar) ||
        !param_ints(dn, "lhs_ragged_dimensions", &lr, &nlr, ar) ||
        !param_ints(dn, "rhs_group_dimensions", &rg, &nrg, ar) || nlb != nrb || nlc != nrc ||
        nlr != 1 || nrg > 1) {
        return op_err(P, op, "ragged_dot_dimension_numbers cannot be read");
    }
    const iv *l = opnd(P, op, 0), *rr = opnd(P, op, 1), *gs = opnd(P, op, 2);
    if (in_list(lc, nlc, lr[0]) || in_list(lb, nlb, lr[0]) || nrg != 1) {
        return op_err(P, op, "only a ragged non-contracting dimension can be interpreted yet");
    }
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    int64_t G = rr->dims[rg[0]];
    bool ok = gs->kind == IV_TENSOR && et_int(gs->elem) && gs->rank == 1 && gs->dims[0] == G &&
              lr[0] >= 0 && lr[0] < (int64_t)l->rank && rg[0] >= 0 && rg[0] < (int64_t)rr->rank;
    int64_t lst[SP_MAX_RANK], rst[SP_MAX_RANK], lfree[SP_MAX_RANK], rfree[SP_MAX_RANK];
    uint32_t nlf = 0, nrf = 0;
    strides_of(l->dims, l->rank, lst);
    strides_of(rr->dims, rr->rank, rst);
    for (uint32_t k = 0; ok && k < l->rank; k++) {
        if (!in_list(lb, nlb, k) && !in_list(lc, nlc, k)) {
            lfree[nlf++] = k;
        }
    }
    for (uint32_t k = 0; ok && k < rr->rank; k++) {
        if (!in_list(rb, nrb, k) && !in_list(rc, nrc, k) && (int64_t)k != rg[0]) {
            rfree[nrf++] = k;
        }
    }
    ok = ok && r->rank == nlb + nlf + nrf;
    for (uint32_t i = 0; ok && i < nlb; i++) {
        ok = lb[i] >= 0 && lb[i] < (int64_t)l->rank && rb[i] >= 0 && rb[i] < (int64_t)rr->rank &&
             r->dims[i] == l->dims[lb[i]] && r->dims[i] == rr->dims[rb[i]];
    }
    for (uint32_t i = 0; ok && i < nlf; i++) {
        ok = r->dims[nlb + i] == l->dims[lfree[i]];
    }
    for (uint32_t i = 0; ok && i < nrf; i++) {
        ok = r->dims[nlb + nlf + i] == rr->dims[rfree[i]];
    }
    for (uint32_t i = 0; ok && i < nlc; i++) {
        ok = lc[i] >= 0 && lc[i] < (int64_t)l->rank && rc[i] >= 0 && rc[i] < (int64_t)rr->rank &&
             l->dims[lc[i]] == rr->dims[rc[i]];
    }
    if (!ok) {
        iv_unref(r);
        return op_err(P, op, "operands that do not fit its dimension numbers");
    }
    int64_t cdims[SP_MAX_RANK], cc[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    size_t cn = 1;
    for (uint32_t i = 0; i < nlc; i++) {
        cdims[i] = l->dims[lc[i]];
        cn *= (size_t)cdims[i];
    }
    for (size_t j = 0; j < r->n; j++) {
        int64_t lo = 0, ro = 0, row = 0;
        for (uint32_t i = 0; i < nlb; i++) {
            lo += c[i] * lst[lb[i]];
            ro += c[i] * rst[rb[i]];
        }
        for (uint32_t i = 0; i < nlf; i++) {
            lo += c[nlb + i] * lst[lfree[i]];
            if (lfree[i] == lr[0]) {
                row = c[nlb + i];
            }
        }
        for (uint32_t i = 0; i < nrf; i++) {
            ro += c[nlb + nlf + i] * rst[rfree[i]];
        }
        int64_t g = 0, end = 0;
        for (; g < G; g++) {
            end += gs->d.i[g];
            if (row < end) {
                break;
            }
        }
        sv acc = {0, 0, 0};
        if (g < G) {
            ro += g * rst[rg[0]];
            memset(cc, 0, sizeof(int64_t) * nlc);
            for (size_t t = 0; t < cn; t++) {
                int64_t li = lo, ri = ro;
                for (uint32_t i = 0; i < nlc; i++) {
                    li += cc[i] * lst[lc[i]];
                    ri += cc[i] * rst[rc[i]];
                }
                sv x = ex_interp_convert(l->elem, r->elem, iv_get(l, (size_t)li));
                sv y = ex_interp_convert(rr->elem, r->elem, iv_get(rr, (size_t)ri));
                acc = mul_add(r->elem, acc, x, y);
                coord_next(cc, cdims, nlc);
            }
        }
        iv_set(r, j, acc);
        coord_next(c, r->dims, r->rank);
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* The single dimension key of a #stablehlo.conv parameter list, in [0, rank). */
static bool conv_dim(const sp_attr *dn, const char *key, uint32_t rank, int64_t *out)
{
    const sp_attr *x = sp_attrs_get(dn->u.params.items, dn->u.params.n, key);
    if (x == NULL || x->kind != SP_ATTR_INT || x->u.i.v < 0 || x->u.i.v >= (int64_t)rank) {
        return false;
    }
    *out = x->u.i.v;
    return true;
}

/* stablehlo.dynamic_conv's dimension numbers and group counts, read here
 * (the planner's reader takes stablehlo.convolution's two operands). */
static cm_status dynamic_conv_dims(iproc *P, uint32_t op, sp_conv_dims *cd, cm_arena *ar)
{
    const sp_attr *dn = attr(P, op, "dimension_numbers");
    const iv *x = opnd(P, op, 0), *k = opnd(P, op, 1);
    uint32_t rank = x->rank;
    const int64_t *v;
    uint32_t n, ns = rank >= 2 ? rank - 2u : 0u;
    memset(cd, 0, sizeof *cd);
    bool ok = OP(P, op)->n_operands == 3 && dn != NULL && dn->kind == SP_ATTR_PARAMS &&
              rank >= 2 && k->rank == rank &&
              conv_dim(dn, "input_batch_dimension", rank, &cd->input_batch) &&
              conv_dim(dn, "input_feature_dimension", rank, &cd->input_feature) &&
              conv_dim(dn, "kernel_input_feature_dimension", rank, &cd->kernel_input_feature) &&
              conv_dim(dn, "kernel_output_feature_dimension", rank, &cd->kernel_output_feature) &&
              conv_dim(dn, "output_batch_dimension", rank, &cd->output_batch) &&
              conv_dim(dn, "output_feature_dimension", rank, &cd->output_feature);
    ok = ok && param_ints(dn, "input_spatial_dimensions", &v, &n, ar) && n == ns &&
         list_copy(v, n, cd->input_spatial, &cd->n_spatial);
    ok = ok && param_ints(dn, "kernel_spatial_dimensions", &v, &n, ar) && n == ns &&
         list_copy(v, n, cd->kernel_spatial, &cd->n_spatial);
    ok = ok && param_ints(dn, "output_spatial_dimensions", &v, &n, ar) && n == ns &&
         list_copy(v, n, cd->output_spatial, &cd->n_spatial);
    for (uint32_t j = 0; ok && j < ns; j++) {
        ok = cd->input_spatial[j] >= 0 && cd->input_spatial[j] < (int64_t)rank &&
             cd->kernel_spatial[j] >= 0 && cd->kernel_spatial[j] < (int64_t)rank &&
             cd->output_spatial[j] >= 0 && cd->output_spatial[j] < (int64_t)rank;
    }
    cd->batch_group_count = int_attr(P, op, "batch_group_count", 1);
    cd->feature_group_count = int_attr(P, op, "feature_group_count", 1);
    if (!ok) {
        return op_err(P, op, "dimension numbers that do not fit its operands");
    }
    return CM_OK;
}

static cm_status do_conv(iproc *P, uint32_t op, cm_arena *ar)
{
    sp_conv_dims cd;
    bool dynamic = OP(P, op)->kind == SP_OP_DYNAMIC_CONV;
    cm_status st = dynamic ? dynamic_conv_dims(P, op, &cd, ar)
                           : sp_conv_dims_get(P->cx->m, op, &cd, P->err);
    if (st != CM_OK) {
        return st;
    }
    const iv *x = opnd(P, op, 0), *kr = opnd(P, op, 1);
    iv *r;
    st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    uint32_t ns = cd.n_spatial;
    int64_t stride[SP_MAX_RANK], lo[SP_MAX_RANK], ldil[SP_MAX_RANK], rdil[SP_MAX_RANK];
    bool rev[SP_MAX_RANK];
    const int64_t *v;
    uint32_t n;
    bool ok = true;
    for (uint32_t j = 0; j < ns; j++) {
        stride[j] = ldil[j] = rdil[j] = 1;
        lo[j] = 0;
        rev[j] = false;
    }
    if (ints(P, op, "window_strides", &v, &n, ar)) {
        ok = ok && n == ns;
        for (uint32_t j = 0; ok && j < n; j++) {
            stride[j] = v[j];
            ok = v[j] >= 1;
        }
    }
    if (ints(P, op, "lhs_dilation", &v, &n, ar)) {
        ok = ok && n == ns;
        for (uint32_t j = 0; ok && j < n; j++) {
            ldil[j] = v[j];
            ok = v[j] >= 1;
        }
    }
    if (ints(P, op, "rhs_dilation", &v, &n, ar)) {
        ok = ok && n == ns;
        for (uint32_t j = 0; ok && j < n; j++) {
            rdil[j] = v[j];
            ok = v[j] >= 1;
        }
    }
    if (dynamic) {
        const iv *pd = opnd(P, op, 2);
        ok = ok && et_int(pd->elem) && pd->n == 2u * ns;
        for (uint32_t j = 0; ok && j < ns; j++) {
            lo[j] = pd->d.i[2 * j];
        }
    } else if (ints(P, op, "padding", &v, &n, ar)) {
        ok = ok && n == 2 * ns;
        for (uint32_t j = 0; ok && j < ns; j++) {
            lo[j] = v[2 * j];
        }
    }
    if (ints(P, op, "window_reversal", &v, &n, ar)) {
        ok = ok && n == ns;
        for (uint32_t j = 0; ok && j < n; j++) {
            rev[j] = v[j] != 0;
        }
    }
    int64_t fgc = cd.feature_group_count, bgc = cd.batch_group_count;
    int64_t C = x->dims[cd.input_feature], N = x->dims[cd.input_batch];
    int64_t KI = kr->dims[cd.kernel_input_feature], O = kr->dims[cd.kernel_output_feature];
    ok = ok && fgc >= 1 && bgc >= 1 && KI * fgc == C && O % fgc == 0 && O % bgc == 0 &&
         N % bgc == 0 && r->dims[cd.output_feature] == O && r->dims[cd.output_batch] == N / bgc;
    if (!ok) {
        iv_unref(r);
        return op_err(P, op, "window or group attributes that do not fit its operands");
    }
    int64_t xst[SP_MAX_RANK], kst[SP_MAX_RANK], c[SP_MAX_RANK] = {0}, kc[SP_MAX_RANK];
    strides_of(x->dims, x->rank, xst);
    strides_of(kr->dims, kr->rank, kst);
    size_t kwin = 1;
    int64_t kdims[SP_MAX_RANK];
    for (uint32_t j = 0; j < ns; j++) {
        kdims[j] = kr->dims[cd.kernel_spatial[j]];
        kwin *= (size_t)kdims[j];
    }
    int64_t ofg = O / fgc, obg = O / bgc, nb = N / bgc;
    for (size_t q = 0; q < r->n; q++) {
        int64_t b = c[cd.output_batch], of = c[cd.output_feature];
        int64_t fg = of / ofg, bg = of / obg;
        sv acc = {0, 0, 0};
        for (int64_t ki = 0; ki < KI; ki++) {
            int64_t ifeat = fg * KI + ki, ib = bg * nb + b;
            memset(kc, 0, sizeof(int64_t) * ns);
            for (size_t t = 0; t < kwin; t++) {
                int64_t xi = ib * xst[cd.input_batch] + ifeat * xst[cd.input_feature];
                int64_t kidx = ki * kst[cd.kernel_input_feature] + of * kst[cd.kernel_output_feature];
                bool inside = true;
                for (uint32_t j = 0; j < ns && inside; j++) {
                    int64_t kk = rev[j] ? kdims[j] - 1 - kc[j] : kc[j];
                    int64_t p = c[cd.output_spatial[j]] * stride[j] + kc[j] * rdil[j] - lo[j];
                    int64_t xd = x->dims[cd.input_spatial[j]];
                    inside = p >= 0 && p % ldil[j] == 0 && p / ldil[j] < xd;
                    xi += (p / ldil[j]) * xst[cd.input_spatial[j]];
                    kidx += kk * kst[cd.kernel_spatial[j]];
                }
                if (inside) {
                    sv xv = ex_interp_convert(x->elem, r->elem, iv_get(x, (size_t)xi));
                    sv kv = ex_interp_convert(kr->elem, r->elem, iv_get(kr, (size_t)kidx));
                    acc = mul_add(r->elem, acc, xv, kv);
                }
                coord_next(kc, kdims, ns);
            }
        }
        iv_set(r, q, acc);
        coord_next(c, r->dims, r->rank);
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* ---- fft and triangular_solve ------------------------------------------------------------ */

/* In-place DFT (inverse: e^{+i}, scaled by 1/N) of every line along dim d
 * of the complex (re, im) array x of dims. */
static cm_status dft_lines(double *x, const int64_t *dims, uint32_t rank, uint32_t d, bool inverse)
{
    int64_t st[SP_MAX_RANK], c[SP_MAX_RANK] = {0}, ld[SP_MAX_RANK];
    strides_of(dims, rank, st);
    int64_t N = dims[d];
    memcpy(ld, dims, sizeof(int64_t) * rank);
    ld[d] = 1;
    size_t lines = 1;
    for (uint32_t k = 0; k < rank; k++) {
        lines *= (size_t)ld[k];
    }
    double *tmp = cm_alloc(sizeof(double) * 2u * (size_t)(N + 1));
    if (tmp == NULL) {
        return CM_ENOMEM;
    }
    const double pi = 3.14159265358979323846;
    for (size_t l = 0; l < lines && N > 0; l++) {
        int64_t b = 0;
        for (uint32_t k = 0; k < rank; k++) {
            b += c[k] * st[k];
        }
        for (int64_t kk = 0; kk < N; kk++) {
            double re = 0, im = 0;
            for (int64_t n = 0; n < N; n++) {
                double ang = (inverse ? 2.0 : -2.0) * pi * (double)((kk * n) % N) / (double)N;
                double xr = x[2 * (b + n * st[d])], xi = x[2 * (b + n * st[d]) + 1];
                re += xr * cos(ang) - xi * sin(ang);
                im += xr * sin(ang) + xi * cos(ang);
            }
            tmp[2 * kk] = inverse ? re / (double)N : re;
            tmp[2 * kk + 1] = inverse ? im / (double)N : im;
        }
        for (int64_t kk = 0; kk < N; kk++) {
            x[2 * (b + kk * st[d])] = tmp[2 * kk];
            x[2 * (b + kk * st[d]) + 1] = tmp[2 * kk + 1];
        }
        coord_next(c, ld, rank);
    }
    cm_free(tmp);
    return CM_OK;
}

static cm_status do_fft(iproc *P, uint32_t op, cm_arena *ar)
{
    const iv *a = opnd(P, op, 0);
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    const sp_attr *ta = attr(P, op, "fft_type");
    const char *ty = ta != NULL && ta->kind == SP_ATTR_ENUM ? ta->u.enm.value : NULL;
    const int64_t *len;
    uint32_t nl;
    bool ok = ty != NULL && ints(P, op, "fft_length", &len, &nl, ar) && nl >= 1 && nl <= 3 &&
              nl <= a->rank && a->rank == r->rank;
    bool real_in = ok && strcmp(ty, "RFFT") == 0, real_out = ok && strcmp(ty, "IRFFT") == 0;
    bool inverse = ok && (strcmp(ty, "IFFT") == 0 || real_out);
    /* the full complex array the transforms run on: the fft dims at their lengths */
    int64_t fd[SP_MAX_RANK];
    for (uint32_t k = 0; ok && k < a->rank; k++) {
        fd[k] = k + nl >= a->rank ? len[k + nl - a->rank] : a->dims[k];
        ok = fd[k] >= 0;
    }
    if (!ok) {
        iv_unref(r);
        return op_err(P, op, "fft_type or fft_length that cannot be read");
    }
    size_t n = 1;
    for (uint32_t k = 0; k < a->rank; k++) {
        n *= (size_t)fd[k];
    }
    double *x = cm_calloc(2u * n + 2u, sizeof(double));
    if (x == NULL) {
        iv_unref(r);
        return cm_error_oom(P->err);
    }
    /* load the operand (an IRFFT's last dim holds N/2 + 1 of N) */
    int64_t xst[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    strides_of(fd, a->rank, xst);
    uint32_t last = a->rank - 1u;
    for (size_t j = 0; j < a->n; j++) {
        bool inside = true;
        int64_t xi = 0;
        for (uint32_t k = 0; k < a->rank; k++) {
            inside = inside && c[k] < fd[k];
            xi += c[k] * xst[k];
        }
        if (inside) {
            sv v = iv_get(a, j);
            x[2 * xi] = et_int(a->elem) ? sv_num(a->elem, v) : v.re;
            x[2 * xi + 1] = a->w == 2 ? v.im : 0.0;
        }
        coord_next(c, a->dims, a->rank);
    }
    cm_status ks = CM_OK;
    uint32_t first = a->rank - nl;
    for (uint32_t k = first; ks == CM_OK && k < a->rank; k++) {
        if (real_out && k == last) {
            /* each line along the last dim is the spectrum of a real signal:
             * fill k > N/2 as the conjugate of N - k */
            int64_t N = fd[last], ld[SP_MAX_RANK], lc[SP_MAX_RANK] = {0};
            memcpy(ld, fd, sizeof(int64_t) * a->rank);
            ld[last] = 1;
            size_t lines = n / (size_t)(N == 0 ? 1 : N);
            for (size_t l = 0; l < lines && N > 0; l++) {
                int64_t b = 0;
                for (uint32_t q = 0; q < a->rank; q++) {
                    b += lc[q] * xst[q];
                }
                for (int64_t t = N / 2 + 1; t < N; t++) {
                    x[2 * (b + t)] = x[2 * (b + N - t)];
                    x[2 * (b + t) + 1] = -x[2 * (b + N - t) + 1];
                }
                coord_next(lc, ld, a->rank);
            }
        }
        ks = dft_lines(x, fd, a->rank, k, inverse);
    }
    if (ks != CM_OK) {
        cm_free(x);
        iv_unref(r);
        return cm_error_oom(P->err);
    }
    for (uint32_t k = 0; k < r->rank; k++) {
        if (r->dims[k] > fd[k]) {
            cm_free(x);
            iv_unref(r);
            return op_err(P, op, "its result is larger than its fft_length");
        }
    }
    /* store: an RFFT keeps N/2 + 1 of the last dim, an IRFFT the real parts */
    memset(c, 0, sizeof c);
    for (size_t j = 0; j < r->n; j++) {
        int64_t xi = 0;
        for (uint32_t k = 0; k < r->rank; k++) {
            xi += c[k] * xst[k];
        }
        sv v = {0, x[2 * xi], real_out ? 0.0 : x[2 * xi + 1]};
        iv_set(r, j, v);
        coord_next(c, r->dims, r->rank);
    }
    (void)real_in;
    cm_free(x);
    put_res(P, op, 0, r);
    return CM_OK;
}

static bool bool_attr(iproc *P, uint32_t op, const char *name)
{
    const sp_attr *a = attr(P, op, name);
    return a != NULL && (a->kind == SP_ATTR_UNIT || (a->kind == SP_ATTR_BOOL && a->u.b));
}

/* stablehlo.triangular_solve: op(a) x = b (left_side) or x op(a) = b, with a
 * read from its lower or upper triangle (unit_diagonal: ones on it), op
 * a transpose or adjoint when transpose_a says so; batch dims lead. */
static cm_status do_triangular_solve(iproc *P, uint32_t op)
{
    const iv *a = opnd(P, op, 0), *b = opnd(P, op, 1);
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    bool left = bool_attr(P, op, "left_side"), lower = bool_attr(P, op, "lower");
    bool unit = bool_attr(P, op, "unit_diagonal");
    const sp_attr *ta = attr(P, op, "transpose_a");
    const char *tv = ta != NULL && ta->kind == SP_ATTR_ENUM ? ta->u.enm.value : "NO_TRANSPOSE";
    bool trans = strcmp(tv, "NO_TRANSPOSE") != 0, adj = strcmp(tv, "ADJOINT") == 0;
    uint32_t rk = a->rank;
    if (rk < 2 || b->rank != rk || r->n != b->n || a->dims[rk - 1] != a->dims[rk - 2]) {
        iv_unref(r);
        return op_err(P, op, "operands that are not batches of square and matching matrices");
    }
    int64_t M = a->dims[rk - 1], R = b->dims[rk - 2], C = b->dims[rk - 1];
    if ((left && R != M) || (!left && C != M)) {
        iv_unref(r);
        return op_err(P, op, "b does not match a");
    }
    int64_t K = left ? C : R; /* right-hand sides */
    size_t batches = M == 0 ? 0 : a->n / (size_t)(M * M);
    if (R * C != 0 && b->n / (size_t)(R * C) != batches) {
        iv_unref(r);
        return op_err(P, op, "a and b have different batch sizes");
    }
    double *t = cm_calloc(2u * (size_t)(M * M) + 2u, sizeof(double));
    double *x = cm_calloc(2u * (size_t)M + 2u, sizeof(double));
    if (t == NULL || x == NULL) {
        cm_free(t);
        cm_free(x);
        iv_unref(r);
        return cm_error_oom(P->err);
    }
    /* T = op(tri(a)), transposed again for a right-side solve, so that the
     * system is always T x = rhs */
    bool t_lower = lower != trans;
    if (!left) {
        t_lower = !t_lower;
    }
    for (size_t bt = 0; bt < batches; bt++) {
        size_t ab = bt * (size_t)(M * M), bb = bt * (size_t)(R * C);
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < M; j++) {
                /* element (i, j) of op(a), then transposed for the right side */
                int64_t ii = left ? i : j, jj = left ? j : i;
                int64_t si = trans ? jj : ii, sj = trans ? ii : jj;
                bool keep = lower ? sj <= si : sj >= si;
                sv v = keep ? iv_get(a, ab + (size_t)(si * M + sj)) : (sv){0, 0, 0};
                if (et_int(a->elem)) {
                    v.re = (double)v.i;
                }
                if (si == sj && unit) {
                    v.re = 1.0;
                    v.im = 0.0;
                }
                t[2 * (i * M + j)] = v.re;
                t[2 * (i * M + j) + 1] = adj ? -v.im : v.im;
            }
        }
        for (int64_t k = 0; k < K; k++) {
            for (int64_t i = 0; i < M; i++) {
                size_t bi = bb + (size_t)(left ? i * C + k : k * C + i);
                sv v = iv_get(b, bi);
                x[2 * i] = v.re;
                x[2 * i + 1] = v.im;
            }
            for (int64_t s = 0; s < M; s++) {
                int64_t i = t_lower ? s : M - 1 - s;
                double re = x[2 * i], im = x[2 * i + 1];
                for (int64_t j = 0; j < M; j++) {
                    if (j == i || (t_lower ? j > i : j < i)) {
                        continue;
                    }
                    double tr = t[2 * (i * M + j)], ti = t[2 * (i * M + j) + 1];
                    re -= tr * x[2 * j] - ti * x[2 * j + 1];
                    im -= tr * x[2 * j + 1] + ti * x[2 * j];
                }
                double dr = t[2 * (i * M + i)], di = t[2 * (i * M + i) + 1], dn = dr * dr + di * di;
                x[2 * i] = (re * dr + im * di) / dn;
                x[2 * i + 1] = (im * dr - re * di) / dn;
            }
            for (int64_t i = 0; i < M; i++) {
                size_t bi = bb + (size_t)(left ? i * C + k : k * C + i);
                sv v = {0, x[2 * i], x[2 * i + 1]};
                iv_set(r, bi, v);
            }
        }
    }
    cm_free(t);
    cm_free(x);
    put_res(P, op, 0, r);
    return CM_OK;
}

/* ---- bit casts and precision --------------------------------------------------------------- */

static uint64_t elem_bits(const iv *t, size_t k, uint32_t part)
{
    if (et_int(t->elem)) {
        return (uint64_t)t->d.i[k];
    }
    return ex_interp_bits(t->elem, t->d.f[k * t->w + part]);
}

static cm_status do_bitcast(iproc *P, uint32_t op)
{
    const iv *a = opnd(P, op, 0);
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    /* one bit stream, element after element, each from its lowest bit */
    unsigned wa = et_width(a->elem), wr = et_width(r->elem);
    size_t bits_a = a->n * a->w * wa, bits_r = r->n * r->w * wr;
    if (bits_a != bits_r) {
        iv_unref(r);
        return op_err(P, op, "element widths that do not cast");
    }
    uint8_t *buf = cm_calloc(bits_a / 8u + 2u, 1);
    if (buf == NULL) {
        iv_unref(r);
        return cm_error_oom(P->err);
    }
    size_t at = 0;
    for (size_t k = 0; k < a->n; k++) {
        for (uint32_t part = 0; part < a->w; part++) {
            uint64_t b = elem_bits(a, k, part);
            for (unsigned q = 0; q < wa; q++, at++) {
                buf[at / 8u] = (uint8_t)(buf[at / 8u] | (((b >> q) & 1u) << (at % 8u)));
            }
        }
    }
    at = 0;
    for (size_t k = 0; k < r->n; k++) {
        for (uint32_t part = 0; part < r->w; part++) {
            uint64_t b = 0;
            for (unsigned q = 0; q < wr; q++, at++) {
                b |= (uint64_t)(((unsigned)buf[at / 8u] >> (at % 8u)) & 1u) << q;
            }
            if (et_int(r->elem)) {
                r->d.i[k] = et_wrap(r->elem, (int64_t)b);
            } else {
                r->d.f[k * r->w + part] = ex_interp_from_bits(r->elem, b);
            }
        }
    }
    cm_free(buf);
    put_res(P, op, 0, r);
    return CM_OK;
}

/* v of float type e rounded to ebits exponent and mbits mantissa bits, on
 * e's bits as XLA's reduce_precision does: the mantissa rounded to nearest
 * even, exponents past the reduced range to infinity, below it to zero; a
 * NaN stays itself, or becomes infinity when no mantissa bit is left. */
static double reduce_precision(sp_elem e, double v, int64_t ebits, int64_t mbits)
{
    unsigned total = et_width(e);
    unsigned sm = (unsigned)sp_float_precision(e) - 1u;
    unsigned se = total - 1u - sm;
    uint64_t x = ex_interp_bits(e, v);
    if (isnan(v)) {
        if (mbits > 0) {
            return v;
        }
        return signbit(v) ? -(double)INFINITY : (double)INFINITY;
    }
    if (mbits < (int64_t)sm) {
        unsigned sh = sm - (unsigned)mbits;
        uint64_t last = UINT64_C(1) << sh;
        uint64_t bias = (last >> 1) - 1u + ((x & last) >> sh);
        x = (x + bias) & ~(last - 1u);
    }
    if (ebits < (int64_t)se) {
        uint64_t sign = UINT64_C(1) << (total - 1u);
        uint64_t emask = ((UINT64_C(1) << se) - 1u) << sm;
        uint64_t ebias = (UINT64_C(1) << (se - 1u)) - 1u;
        uint64_t rbias = (UINT64_C(1) << (ebits - 1)) - 1u;
        uint64_t xe = x & emask;
        if (xe > ((ebias + rbias) << sm)) {
            x = (x & sign) | emask;
        } else if (xe <= ((ebias - rbias) << sm)) {
            x = x & sign;
        }
    }
    return ex_interp_from_bits(e, x);
}

static cm_status do_reduce_precision(iproc *P, uint32_t op)
{
    const iv *a = opnd(P, op, 0);
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    int64_t eb = int_attr(P, op, "exponent_bits", -1), mb = int_attr(P, op, "mantissa_bits", -1);
    if (eb < 1 || eb > 11 || mb < 0 || mb > 52 || !et_flt(a->elem) || r->n != a->n) {
        iv_unref(r);
        return op_err(P, op, "exponent_bits or mantissa_bits cannot be read");
    }
    if (a->elem != SP_ELEM_F64 && a->elem != SP_ELEM_F32 && a->elem != SP_ELEM_F16 &&
        a->elem != SP_ELEM_BF16) {
        iv_unref(r);
        return op_err(P, op, "reduce_precision of the f8, f6 and f4 types is not interpreted");
    }
    for (size_t j = 0; j < a->n; j++) {
        r->d.f[j] = et_round(r->elem, reduce_precision(a->elem, a->d.f[j], eb, mb));
    }
    put_res(P, op, 0, r);
    return CM_OK;
}

/* ---- collectives ------------------------------------------------------------------------- */

enum { PG_CROSS_REPLICA, PG_CROSS_PARTITION, PG_CROSS_REPLICA_AND_PARTITION, PG_FLATTENED };

static int64_t channel_of(iproc *P, uint32_t op)
{
    const sp_attr *a = attr(P, op, "channel_handle");
    if (a == NULL || a->kind != SP_ATTR_PARAMS) {
        return 0;
    }
    const sp_attr *h = sp_attrs_get(a->u.params.items, a->u.params.n, "handle");
    return h != NULL && h->kind == SP_ATTR_INT ? h->u.i.v : 0;
}

static uint32_t n_rep(const iproc *P)
{
    return P->run != NULL ? P->run->n_rep : 1u;
}

static uint32_t n_part(const iproc *P)
{
    return P->run != NULL ? P->run->n_part : 1u;
}

/* The members of this process's group (process ids, in group order) under
 * strategy mode and the groups of attribute key (rows of a 2-D dense
 * integer attribute; -1 entries are padding; absent or empty: everybody);
 * *pos is this process's place. */
static cm_status proc_group(iproc *P, uint32_t op, int mode, const char *key, bool outside_ok,
                            int64_t *mem, uint32_t *n_mem, uint32_t *pos)
{
    uint32_t R = n_rep(P), Q = n_part(P);
    const sp_attr *a = attr(P, op, key);
    uint32_t rows = 0, cols = 0;
    const int64_t *g = NULL;
    if (a != NULL && a->kind == SP_ATTR_DENSE) {
        const sp_type *t = &P->cx->m->types[a->u.dense.type];
        if (t->rank != 2 || (a->u.dense.ints == NULL && t->dims[0] * t->dims[1] != 0)) {
            return op_err(P, op, "%s is not a 2-D integer tensor", key);
        }
        rows = (uint32_t)t->dims[0];
        cols = (uint32_t)t->dims[1];
        g = a->u.dense.ints;
        if (a->u.dense.n_ints != (size_t)rows * cols) {
            /* a splat (dense<0> : tensor<1x1xi64>) */
            if (a->u.dense.n_ints != 1) {
                return op_err(P, op, "%s cannot be read", key);
            }
        }
    }
    uint32_t space = mode == PG_CROSS_PARTITION ? Q : mode == PG_FLATTENED ? R * Q : R;
    uint32_t mine = mode == PG_CROSS_PARTITION ? P->part : mode == PG_FLATTENED ? P->id : P->rep;
    int64_t row[1024];
    uint32_t nr = 0;
    if (rows == 0 || cols == 0) {
        for (uint32_t i = 0; i < space && i < 1024; i++) {
            row[nr++] = i;
        }
    } else {
        bool found = false;
        for (uint32_t r = 0; r < rows && !found; r++) {
            nr = 0;
            for (uint32_t c = 0; c < cols && nr < 1024; c++) {
                int64_t v = a->u.dense.n_ints == 1 ? g[0] : g[(size_t)r * cols + c];
                if (v < 0) {
                    continue;
                }
                if (v >= (int64_t)space) {
                    return op_err(P, op, "%s names id %lld of %u", key, (long long)v, space);
                }
                row[nr++] = v;
                found = found || v == (int64_t)mine;
            }
        }
        if (!found) {
            *n_mem = 0;
            *pos = UINT32_MAX;
            return outside_ok ? CM_OK
                              : op_err(P, op, "process (%u, %u) is in none of its %s", P->rep,
                                       P->part, key);
        }
    }
    *n_mem = 0;
    *pos = UINT32_MAX;
    if (mode == PG_CROSS_REPLICA_AND_PARTITION) {
        for (uint32_t p = 0; p < Q; p++) {
            for (uint32_t i = 0; i < nr && *n_mem < 1024; i++) {
                mem[(*n_mem)++] = row[i] * Q + p;
            }
        }
    } else {
        for (uint32_t i = 0; i < nr; i++) {
            mem[(*n_mem)++] = mode == PG_CROSS_REPLICA       ? row[i] * Q + P->part
                              : mode == PG_CROSS_PARTITION ? (int64_t)P->rep * Q + row[i]
                                                           : row[i];
        }
    }
    for (uint32_t i = 0; i < *n_mem; i++) {
        if (mem[i] == (int64_t)P->id) {
            *pos = i;
        }
    }
    if (*pos == UINT32_MAX) {
        return op_err(P, op, "process (%u, %u) is in none of its %s", P->rep, P->part, key);
    }
    return CM_OK;
}

/* The strategy of all_reduce-like collectives. */
static int reduce_mode(iproc *P, uint32_t op)
{
    bool global = attr(P, op, "use_global_device_ids") != NULL;
    if (channel_of(P, op) <= 0) {
        return PG_CROSS_REPLICA;
    }
    return global ? PG_FLATTENED : PG_CROSS_REPLICA_AND_PARTITION;
}

/* Posts ops (n of them) and waits for every process: after it, peer i's
 * operands are posted[i]. */
static cm_status coll_enter(iproc *P, uint32_t op, iv *const *ops, uint32_t n, iv *const **solo,
                            iv *const ***posted)
{
    if (P->run == NULL) {
        solo[0] = ops;
        *posted = solo;
        return CM_OK;
    }
    P->run->posted[P->id] = ops;
    P->run->n_posted[P->id] = n;
    if (!run_sync(P->run)) {
        return op_err(P, op, "its peers failed or never came to it");
    }
    *posted = P->run->posted;
    return CM_OK;
}

static cm_status coll_leave(iproc *P, uint32_t op)
{
    if (P->run != NULL && !run_sync(P->run)) {
        return op_err(P, op, "its peers failed or never came to it");
    }
    return CM_OK;
}

static cm_status check_peers(iproc *P, uint32_t op, iv *const *const *posted, const int64_t *mem,
                             uint32_t n_mem, uint32_t n_ops)
{
    for (uint32_t i = 0; i < n_mem; i++) {
        if (P->run != NULL && P->run->n_posted[mem[i]] != n_ops) {
            return op_err(P, op, "its peers disagree on its operands");
        }
        for (uint32_t j = 0; j < n_ops; j++) {
            const iv *a = posted[mem[i]][j], *b = posted[P->id][j];
            bool same = a->kind == IV_TENSOR && b->kind == IV_TENSOR && a->n == b->n &&
                        a->elem == b->elem && a->rank == b->rank;
            for (uint32_t k = 0; same && k < a->rank; k++) {
                same = a->dims[k] == b->dims[k];
            }
            if (!same) {
                return op_err(P, op, "its peers' operands have other shapes");
            }
        }
    }
    return CM_OK;
}

/* Element-wise fold over the group (all_reduce, reduce_scatter,
 * collective_reduce): res[j] (new, shaped as operand j) = the body over the
 * members in group order. A body of two arguments reduces each operand on
 * its own; one of 2 * n_ops arguments reduces them together. */
static cm_status group_fold(iproc *P, uint32_t op, iv *const *const *posted, const int64_t *mem,
                            uint32_t n_mem, uint32_t n_ops, iv **res)
{
    const sp_op *o = OP(P, op);
    if (o->n_regions < 1 || o->regions[0].n_blocks != 1) {
        return op_err(P, op, "has no reduction body");
    }
    uint32_t n_args = P->cx->m->blocks[o->regions[0].blocks[0]].n_args;
    bool joint = n_args == 2 * n_ops && n_ops > 1;
    if (!joint && n_args != 2) {
        return op_err(P, op, "its body takes %u arguments for %u operands", n_args, n_ops);
    }
    uint32_t per = joint ? n_ops : 1u;
    rbody body;
    cm_status st = body_init(P, op, 0, 2 * per, per, &body);
    for (uint32_t j = 0; st == CM_OK && j < n_ops; j++) {
        const iv *a = posted[P->id][j];
        res[j] = iv_new(a->elem, a->dims, a->rank);
        if (res[j] == NULL) {
            st = cm_error_oom(P->err);
        }
        if (st == CM_OK && joint && a->n != posted[P->id][0]->n) {
            st = op_err(P, op, "operands of different sizes reduced together");
        }
    }
    sv in[32], out[16];
    for (uint32_t j0 = 0; st == CM_OK && j0 < n_ops; j0 += per) {
        size_t n = posted[P->id][j0]->n;
        for (size_t k = 0; st == CM_OK && k < n; k++) {
            for (uint32_t j = 0; j < per; j++) {
                in[j] = iv_get(posted[mem[0]][j0 + j], k);
            }
            for (uint32_t i = 1; st == CM_OK && i < n_mem; i++) {
                for (uint32_t j = 0; j < per; j++) {
                    in[per + j] = iv_get(posted[mem[i]][j0 + j], k);
                }
                st = body_call(P, &body, in, out);
                for (uint32_t j = 0; j < per; j++) {
                    in[j] = out[j];
                }
            }
            for (uint32_t j = 0; st == CM_OK && j < per; j++) {
                iv_set(res[j0 + j], k, in[j]);
            }
        }
    }
    body_fini(&body);
    return st;
}

/* Copies block `part` of a along dim (a's dim split in `parts` equal
 * blocks) into r at block `at` along r's dim rdim (r holds rparts blocks). */
static void block_copy(const iv *a, int64_t dim, int64_t part, int64_t parts, iv *r, int64_t rdim,
                       int64_t at)
{
    int64_t bsz = a->dims[dim] / parts;
    int64_t bdims[SP_MAX_RANK], ast[SP_MAX_RANK], rst[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    memcpy(bdims, a->dims, sizeof(int64_t) * a->rank);
    bdims[dim] = bsz;
    strides_of(a->dims, a->rank, ast);
    strides_of(r->dims, r->rank, rst);
    size_t n = 1;
    for (uint32_t k = 0; k < a->rank; k++) {
        n *= (size_t)bdims[k];
    }
    for (size_t j = 0; j < n; j++) {
        int64_t ai = 0, ri = 0;
        for (uint32_t k = 0; k < a->rank; k++) {
            int64_t x = c[k] + ((int64_t)k == dim ? part * bsz : 0);
            ai += x * ast[k];
            int64_t y = c[k] + ((int64_t)k == rdim ? at * bdims[rdim] : 0);
            ri += y * rst[k];
        }
        copy_elem(r, (size_t)ri, a, (size_t)ai);
        coord_next(c, bdims, a->rank);
    }
}

static cm_status do_collective(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    sp_op_kind k = (sp_op_kind)o->kind;
    uint32_t n_ops = o->n_operands;
    /* has_dynamic_root: the last operand names each result's source */
    bool dyn_root = attr(P, op, "has_dynamic_root") != NULL;
    uint32_t n_res = dyn_root ? n_ops - 1u : n_ops;
    if (n_ops == 0 || n_ops > 16 || o->n_results != n_res) {
        return op_err(P, op, "unexpected operand or result count");
    }
    iv **ops;
    cm_status st = operands_of(P, op, 0, n_ops, &ops);
    if (st != CM_OK) {
        return st;
    }
    int64_t mem[1024];
    uint32_t n_mem = 0, pos = 0;
    bool permute = k == SP_OP_COLLECTIVE_PERMUTE;
    bool by_channel = k == SP_OP_COLLECTIVE_PERMUTE || k == SP_OP_COLLECTIVE_BROADCAST ||
                      k == SP_OP_ALL_TO_ALL || k == SP_OP_UNKNOWN;
    int mode = by_channel ? (channel_of(P, op) <= 0 ? PG_CROSS_REPLICA : PG_CROSS_PARTITION)
                          : reduce_mode(P, op);
    /* broadcast and collective_reduce give zeros outside every group */
    bool outside_ok = k == SP_OP_COLLECTIVE_BROADCAST || k == SP_OP_UNKNOWN;
    if (!permute) {
        st = proc_group(P, op, mode, "replica_groups", outside_ok, mem, &n_mem, &pos);
    }
    iv *const **posted = NULL;
    iv *const *solo[1] = {NULL};
    if (st == CM_OK) {
        st = coll_enter(P, op, ops, n_ops, solo, &posted);
    }
    iv *res[16] = {NULL};
    if (st == CM_OK && !permute) {
        st = check_peers(P, op, posted, mem, n_mem, n_ops);
    }
    if (st == CM_OK) {
        switch (k) {
        case SP_OP_ALL_REDUCE:
            st = group_fold(P, op, posted, mem, n_mem, n_ops, res);
            break;
        case SP_OP_REDUCE_SCATTER: {
            iv *full[16] = {NULL};
            int64_t d = int_attr(P, op, "scatter_dimension", -1);
            st = group_fold(P, op, posted, mem, n_mem, n_ops, full);
            for (uint32_t j = 0; st == CM_OK && j < n_ops; j++) {
                st = new_res(P, op, j, &res[j]);
                bool fits = st == CM_OK && d >= 0 && d < (int64_t)full[j]->rank &&
                            res[j]->rank == full[j]->rank &&
                            full[j]->dims[d] == res[j]->dims[d] * (int64_t)n_mem;
                for (uint32_t q = 0; fits && q < res[j]->rank; q++) {
                    fits = (int64_t)q == d || res[j]->dims[q] == full[j]->dims[q];
                }
                if (st == CM_OK && !fits) {
                    st = op_err(P, op, "scatter_dimension does not split by the group size");
                }
                if (st == CM_OK) {
                    block_copy(full[j], d, pos, n_mem, res[j], d, 0);
                }
            }
            for (uint32_t j = 0; j < n_ops; j++) {
                iv_unref(full[j]);
            }
            break;
        }
        case SP_OP_ALL_GATHER: {
            int64_t d = int_attr(P, op, "all_gather_dim", -1);
            for (uint32_t j = 0; st == CM_OK && j < n_ops; j++) {
                st = new_res(P, op, j, &res[j]);
                const iv *a = ops[j];
                bool fits = st == CM_OK && d >= 0 && d < (int64_t)a->rank &&
                            res[j]->rank == a->rank &&
                            res[j]->dims[d] == a->dims[d] * (int64_t)n_mem;
                for (uint32_t q = 0; fits && q < a->rank; q++) {
                    fits = (int64_t)q == d || res[j]->dims[q] == a->dims[q];
                }
                if (st == CM_OK && !fits) {
                    st = op_err(P, op, "all_gather_dim does not fit the result");
                }
                for (uint32_t i = 0; st == CM_OK && i < n_mem; i++) {
                    block_copy(posted[mem[i]][j], d, 0, 1, res[j], d, i);
                }
            }
            break;
        }
        case SP_OP_ALL_TO_ALL: {
            int64_t sd = int_attr(P, op, "split_dimension", -1);
            int64_t cd = int_attr(P, op, "concat_dimension", -1);
            int64_t cnt = int_attr(P, op, "split_count", -1);
            for (uint32_t j = 0; st == CM_OK && j < n_ops; j++) {
                st = new_res(P, op, j, &res[j]);
                const iv *a = ops[j];
                bool fits = st == CM_OK && sd >= 0 && cd >= 0 && sd < (int64_t)a->rank &&
                            cd < (int64_t)a->rank && cnt == (int64_t)n_mem && cnt > 0 &&
                            a->dims[sd] % cnt == 0 && res[j]->rank == a->rank;
                for (uint32_t q = 0; fits && q < a->rank; q++) {
                    int64_t want = a->dims[q];
                    if ((int64_t)q == sd) {
                        want /= cnt;
                    }
                    if ((int64_t)q == cd) {
                        want *= cnt;
                    }
                    fits = res[j]->dims[q] == want;
                }
                if (st == CM_OK && !fits) {
                    st = op_err(P, op, "split and concat dimensions that do not fit the group");
                }
                for (uint32_t i = 0; st == CM_OK && i < n_mem; i++) {
                    block_copy(posted[mem[i]][j], sd, pos, cnt, res[j], cd, i);
                }
            }
            break;
        }
        case SP_OP_UNKNOWN: /* stablehlo.collective_reduce */
            if (n_mem > 0 && pos == 0) {
                st = group_fold(P, op, posted, mem, n_mem, n_ops, res);
            } else {
                for (uint32_t j = 0; st == CM_OK && j < n_ops; j++) {
                    st = new_res(P, op, j, &res[j]);
                }
            }
            break;
        case SP_OP_COLLECTIVE_BROADCAST:
            for (uint32_t j = 0; st == CM_OK && j < n_res; j++) {
                st = new_res(P, op, j, &res[j]);
                int64_t root = 0;
                if (st == CM_OK && dyn_root) {
                    const iv *rt = ops[n_ops - 1];
                    root = rt->n > j && et_int(rt->elem) ? rt->d.i[j] : -1;
                    if (root < 0 || root >= (int64_t)n_mem) {
                        st = n_mem > 0 ? op_err(P, op, "its dynamic root is out of range") : CM_OK;
                    }
                }
                if (st == CM_OK && n_mem > 0) {
                    const iv *src = posted[mem[root]][j];
                    if (src->n != res[j]->n) {
                        st = op_err(P, op, "its operands have other shapes");
                    } else {
                        memcpy(res[j]->d.p, src->d.p, src->n * src->w * 8u);
                    }
                }
            }
            break;
        case SP_OP_COLLECTIVE_PERMUTE: {
            const sp_attr *a = attr(P, op, "source_target_pairs");
            const int64_t *pv = NULL;
            size_t np = 0;
            if (a != NULL && a->kind == SP_ATTR_DENSE && a->u.dense.ints != NULL) {
                pv = a->u.dense.ints;
                np = a->u.dense.n_ints / 2u;
            } else if (a != NULL) {
                st = op_err(P, op, "source_target_pairs cannot be read");
            }
            uint32_t mine = mode == PG_CROSS_REPLICA ? P->rep : P->part;
            uint32_t space = mode == PG_CROSS_REPLICA ? n_rep(P) : n_part(P);
            int64_t from = -1;
            for (size_t i = 0; st == CM_OK && i < np; i++) {
                if (pv[2 * i] < 0 || pv[2 * i] >= (int64_t)space || pv[2 * i + 1] < 0 ||
                    pv[2 * i + 1] >= (int64_t)space) {
                    st = op_err(P, op, "source_target_pairs names an id out of range");
                } else if (pv[2 * i + 1] == (int64_t)mine) {
                    from = pv[2 * i];
                }
            }
            for (uint32_t j = 0; st == CM_OK && j < n_ops; j++) {
                st = new_res(P, op, j, &res[j]);
                if (st == CM_OK && from >= 0) {
                    int64_t pid = mode == PG_CROSS_REPLICA ? from * n_part(P) + P->part
                                                           : (int64_t)P->rep * n_part(P) + from;
                    const iv *src = posted[pid][j];
                    if (src->n != res[j]->n || src->elem != res[j]->elem) {
                        st = op_err(P, op, "its peers' operands have other shapes");
                    } else {
                        memcpy(res[j]->d.p, src->d.p, src->n * src->w * 8u);
                    }
                }
            }
            break;
        }
        default:
            st = op_err(P, op, "is not a collective the interpreter runs");
            break;
        }
    }
    /* everybody leaves together, also after an error (peers read our operands) */
    cm_status st2 = posted != NULL ? coll_leave(P, op) : CM_OK;
    if (st == CM_OK) {
        st = st2;
    }
    cm_free(ops);
    for (uint32_t j = 0; j < n_res; j++) {
        if (st == CM_OK) {
            put_res(P, op, j, res[j]);
        } else {
            iv_unref(res[j]);
        }
    }
    return st;
}

/* ---- send, recv, infeed, outfeed ------------------------------------------------------- */

static cm_status token_result(iproc *P, uint32_t op, uint32_t i)
{
    iv *t = iv_special(IV_TOKEN, 0);
    if (t == NULL) {
        return cm_error_oom(P->err);
    }
    put_res(P, op, i, t);
    return CM_OK;
}

/* stablehlo.send: queues its operands (all but the token) on its channel
 * for the run's recv of the same handle. */
static cm_status do_send(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    irun *R = P->run;
    if (R == NULL) {
        return op_err(P, op, "send runs only inside interpreter.run_parallel");
    }
    int64_t h = channel_of(P, op);
    for (uint32_t i = 0; i + 1 < o->n_operands; i++) {
        imsg *msg = cm_calloc(1, sizeof *msg);
        if (msg == NULL) {
            return cm_error_oom(P->err);
        }
        msg->handle = h;
        msg->v = iv_ref(opnd(P, op, i));
        pthread_mutex_lock(&R->mu);
        imsg **at = &R->mail;
        while (*at != NULL) {
            at = &(*at)->next;
        }
        *at = msg;
        pthread_cond_broadcast(&R->cv);
        pthread_mutex_unlock(&R->mu);
    }
    return token_result(P, op, 0);
}

/* stablehlo.recv: takes the oldest messages of its channel, one per
 * result but the token, waiting for them; fails when every other process
 * is finished or waiting too. */
static cm_status do_recv(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    irun *R = P->run;
    if (R == NULL || o->n_results < 1) {
        return op_err(P, op, "recv runs only inside interpreter.run_parallel");
    }
    int64_t h = channel_of(P, op);
    for (uint32_t i = 0; i + 1 < o->n_results; i++) {
        iv *got = NULL;
        pthread_mutex_lock(&R->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += SYNC_TIMEOUT_S;
        R->in_recv++;
        R->in_recv_p[P->id] = true;
        R->recv_h[P->id] = h;
        while (!R->failed) {
            imsg **at = &R->mail;
            while (*at != NULL && (*at)->handle != h) {
                at = &(*at)->next;
            }
            if (*at != NULL) {
                imsg *msg = *at;
                *at = msg->next;
                got = msg->v;
                cm_free(msg);
                break;
            }
            if (R->arrived + R->done + stuck_recv(R) == R->n || /* nobody left to send */
                pthread_cond_timedwait(&R->cv, &R->mu, &ts) == ETIMEDOUT) {
                R->failed = true;
                pthread_cond_broadcast(&R->cv);
            }
        }
        R->in_recv--;
        R->in_recv_p[P->id] = false;
        pthread_mutex_unlock(&R->mu);
        if (got == NULL) {
            return op_err(P, op, "nothing was sent on channel %lld", (long long)h);
        }
        put_res(P, op, i, got);
    }
    return token_result(P, op, o->n_results - 1u);
}

/* stablehlo.infeed: the next function of run_parallel's infeed list gives
 * the values. */
static cm_status do_infeed(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    irun *R = P->run;
    if (R == NULL || R->infeed == NULL || o->n_results < 1) {
        return op_err(P, op, "infeed runs only inside interpreter.run_parallel with an infeed");
    }
    pthread_mutex_lock(&R->mu);
    uint32_t k = R->infeed_next < R->infeed->u.arr.n ? R->infeed_next++ : UINT32_MAX;
    pthread_mutex_unlock(&R->mu);
    const sp_attr *f = k != UINT32_MAX ? R->infeed->u.arr.items[k] : NULL;
    uint32_t fn = f != NULL && f->kind == SP_ATTR_SYMBOL ? sp_module_func(P->cx->m, f->u.sym)
                                                         : SP_NONE;
    if (fn == SP_NONE) {
        return op_err(P, op, "the infeed queue is empty");
    }
    iv **res;
    uint32_t nr;
    cm_status st = call_func(P, op, fn, NULL, 0, &res, &nr);
    if (st != CM_OK) {
        return st;
    }
    if (nr + 1u != o->n_results) {
        vals_free(res, nr);
        return op_err(P, op, "its infeed function gives %u values for %u", nr, o->n_results - 1u);
    }
    for (uint32_t i = 0; i < nr; i++) {
        put_res(P, op, i, res[i]);
    }
    cm_free(res);
    return token_result(P, op, nr);
}

/* ---- interpreter.run_parallel -------------------------------------------------------------- */

typedef struct pjob {
    iproc P;
    uint32_t func;   /* SP_NONE: block blk (a manual computation's body) */
    uint32_t blk;
    uint32_t at;     /* the run_parallel op */
    iv **args;
    uint32_t n_args;
    iv **res;
    uint32_t n_res;
    cm_error err;
    cm_status st;
} pjob;

static void *pjob_main(void *arg)
{
    pjob *j = arg;
    j->st = j->func == SP_NONE
                ? run_block(&j->P, j->blk, j->args, j->n_args, &j->res, &j->n_res)
                : call_func(&j->P, j->at, j->func, j->args, j->n_args, &j->res, &j->n_res);
    run_leave(j->P.run, j->st != CM_OK);
    return NULL;
}

static cm_status proc_init(iproc *P, ictx *cx, cm_error *err)
{
    memset(P, 0, sizeof *P);
    P->cx = cx;
    P->err = err;
    P->env = cm_calloc(cx->m->n_values + 1u, sizeof(iv *));
    P->busy = cm_calloc(cx->m->n_ops + 1u, 1);
    if (P->env == NULL || P->busy == NULL) {
        cm_free(P->env);
        cm_free(P->busy);
        P->env = NULL;
        P->busy = NULL;
        return cm_error_oom(err);
    }
    return CM_OK;
}

static void proc_fini(iproc *P)
{
    if (P->env != NULL) {
        for (uint32_t v = 0; v < P->cx->m->n_values; v++) {
            iv_unref(P->env[v]);
        }
    }
    cm_free(P->env);
    cm_free(P->busy);
}

/* A run of n processes (n_rep replicas of n_part partitions): its
 * per-process arrays; false when out of memory (irun_fini frees either way). */
static bool irun_init(irun *run, uint32_t n, uint32_t n_rep, uint32_t n_part)
{
    memset(run, 0, sizeof *run);
    run->n = n;
    run->n_rep = n_rep;
    run->n_part = n_part;
    run->posted = cm_calloc(n + 1u, sizeof *run->posted);
    run->n_posted = cm_calloc(n + 1u, sizeof *run->n_posted);
    run->recv_h = cm_calloc(n + 1u, sizeof *run->recv_h);
    run->in_recv_p = cm_calloc(n + 1u, sizeof *run->in_recv_p);
    return run->posted != NULL && run->n_posted != NULL && run->recv_h != NULL &&
           run->in_recv_p != NULL;
}

/* Frees run's arrays and the messages nobody received. */
static void irun_fini(irun *run)
{
    while (run->mail != NULL) {
        imsg *next = run->mail->next;
        iv_unref(run->mail->v);
        cm_free(run->mail);
        run->mail = next;
    }
    cm_free(run->posted);
    cm_free(run->n_posted);
    cm_free(run->recv_h);
    cm_free(run->in_recv_p);
}

/* Runs jobs[0..n) on a thread each and joins them; returns how many
 * started (the others count as finished, and the run as failed, so the
 * started ones end at their first rendezvous). */
static uint32_t irun_threads(irun *run, pjob *jobs, pthread_t *th, uint32_t n)
{
    uint32_t started = 0;
    pthread_mutex_init(&run->mu, NULL);
    pthread_cond_init(&run->cv, NULL);
    for (; started < n; started++) {
        if (pthread_create(&th[started], NULL, pjob_main, &jobs[started]) != 0) {
            break;
        }
    }
    if (started < n) {
        pthread_mutex_lock(&run->mu);
        run->failed = true;
        run->done += n - started;
        pthread_cond_broadcast(&run->cv);
        pthread_mutex_unlock(&run->mu);
    }
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
    }
    pthread_mutex_destroy(&run->mu);
    pthread_cond_destroy(&run->cv);
    return started;
}

static cm_status do_run_parallel(iproc *P, uint32_t op)
{
    const sp_module *m = P->cx->m;
    const sp_op *o = OP(P, op);
    const sp_attr *pa = attr(P, op, "programs");
    if (P->run != NULL) {
        return op_err(P, op, "a run_parallel inside a run_parallel cannot be interpreted");
    }
    if (pa == NULL || pa->kind != SP_ATTR_ARRAY || pa->u.arr.n == 0) {
        return op_err(P, op, "has no programs it can read");
    }
    uint32_t R = pa->u.arr.n, Q = 0;
    for (uint32_t r = 0; r < R; r++) {
        const sp_attr *row = pa->u.arr.items[r];
        if (row->kind != SP_ATTR_ARRAY || (r > 0 && row->u.arr.n != Q) || row->u.arr.n == 0) {
            return op_err(P, op, "programs is not a grid of function symbols");
        }
        Q = row->u.arr.n;
    }
    if ((uint64_t)R * Q > 256) {
        return op_err(P, op, "more than 256 programs cannot be interpreted");
    }
    uint32_t n = R * Q;
    irun run;
    bool have = irun_init(&run, n, R, Q);
    const sp_attr *inf = attr(P, op, "infeed");
    run.infeed = inf != NULL && inf->kind == SP_ATTR_ARRAY ? inf : NULL;
    pjob *jobs = cm_calloc(n, sizeof *jobs);
    pthread_t *th = cm_calloc(n, sizeof *th);
    cm_status st = CM_OK;
    if (jobs == NULL || th == NULL || !have) {
        st = cm_error_oom(P->err);
    }
    uint32_t next_arg = 0;
    for (uint32_t i = 0; st == CM_OK && i < n; i++) {
        const sp_attr *s = pa->u.arr.items[i / Q]->u.arr.items[i % Q];
        uint32_t f = s->kind == SP_ATTR_SYMBOL ? sp_module_func(m, s->u.sym) : SP_NONE;
        if (f == SP_NONE) {
            st = op_err(P, op, "program %u is not a function of the module", i);
            break;
        }
        const sp_type *ft = sp_func_type(m, f);
        uint32_t na = ft != NULL ? ft->n_inputs : 0;
        if (next_arg + na > o->n_operands) {
            st = op_err(P, op, "has fewer operands than its programs take");
            break;
        }
        jobs[i].func = f;
        jobs[i].at = op;
        jobs[i].n_args = na;
        jobs[i].args = &P->env[0]; /* replaced below */
        iv **args = cm_calloc(na + 1u, sizeof(iv *));
        if (args == NULL) {
            st = cm_error_oom(P->err);
            break;
        }
        for (uint32_t q = 0; q < na; q++) {
            args[q] = opnd(P, op, next_arg + q);
        }
        jobs[i].args = args;
        next_arg += na;
        cm_error_clear(&jobs[i].err);
        st = proc_init(&jobs[i].P, P->cx, &jobs[i].err);
        jobs[i].P.run = &run;
        jobs[i].P.id = i;
        jobs[i].P.rep = i / Q;
        jobs[i].P.part = i % Q;
    }
    if (st == CM_OK && next_arg != o->n_operands) {
        st = op_err(P, op, "has more operands than its programs take");
    }
    if (st == CM_OK && irun_threads(&run, jobs, th, n) < n) {
        st = op_err(P, op, "cannot start %u threads", n);
    }
    /* the first failure in process order; a peer that failed only because
     * another did says less */
    for (uint32_t i = 0; st == CM_OK && i < n; i++) {
        if (jobs[i].st != CM_OK && strstr(jobs[i].err.msg, "peers failed") == NULL) {
            st = cm_error_wrap(P->err, &jobs[i].err, "program %u (replica %u, partition %u)", i,
                               i / Q, i % Q);
        }
    }
    for (uint32_t i = 0; st == CM_OK && i < n; i++) {
        if (jobs[i].st != CM_OK) {
            st = cm_error_wrap(P->err, &jobs[i].err, "program %u", i);
        }
    }
    uint32_t next_res = 0;
    for (uint32_t i = 0; st == CM_OK && i < n; i++) {
        for (uint32_t q = 0; st == CM_OK && q < jobs[i].n_res; q++) {
            if (next_res >= o->n_results) {
                st = op_err(P, op, "its programs return more values than it has results");
                break;
            }
            put_res(P, op, next_res++, iv_ref(jobs[i].res[q]));
        }
    }
    if (st == CM_OK && next_res != o->n_results) {
        st = op_err(P, op, "its programs return %u values for %u results", next_res, o->n_results);
    }
    for (uint32_t i = 0; jobs != NULL && i < n; i++) {
        vals_free(jobs[i].res, jobs[i].n_res);
        if (jobs[i].args != &P->env[0]) {
            cm_free(jobs[i].args);
        }
        if (jobs[i].P.env != NULL) {
            proc_fini(&jobs[i].P);
        }
    }
    irun_fini(&run);
    cm_free(jobs);
    cm_free(th);
    return st;
}

/* ---- sdy.manual_computation (JAX shard_map) ------------------------------------------------
 * The body runs once per device of the computation's mesh, every instance
 * a process of one replica (device d is partition d: partition_id is d,
 * replica_id 0), all in lockstep as run_parallel's programs are, so the
 * StableHLO collectives inside meet at the rendezvous with the spec's
 * process groups. Device d's arguments are its blocks of the operands (the
 * manual axes of each in_sharding, which must lead their dimensions, place
 * them; free axes are not split: every device of a manual group holds the
 * group's local tensor), and its results are written at their places in
 * the global results from the first device (lowest id) of each manual
 * group, in device order. */

#define MANUAL_MAX_DEV 256 /* devices of one manual computation */

typedef struct mgeom {
    const sp_module *m;
    uint32_t op;
    const sp_mesh *mesh;
    const sp_attr *axes; /* manual_axes */
    uint32_t n;          /* devices */
    int64_t coord[MANUAL_MAX_DEV][SP_MAX_RANK]; /* mesh coordinates of each device */
} mgeom;

static bool is_manual(const mgeom *g, const char *name)
{
    for (uint32_t i = 0; i < g->axes->u.axes.n; i++) {
        if (strcmp(g->axes->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* Device d's offsets (off[rank]) of its block of value gv (global type)
 * in sharding s, checking that the local type is lv's. */
static cm_status manual_place(const mgeom *g, const sp_sharding *s, uint32_t gv, uint32_t lv,
                              uint32_t d, int64_t *off, cm_error *err)
{
    const sp_type *gt = sp_value_type(g->m, gv), *lt = sp_value_type(g->m, lv);
    const char *nm = g->m->ops[g->op].name;
    if (s == NULL || s->rank != gt->rank || gt->rank != lt->rank || gt->elem != lt->elem) {
        return sp_op_error(g->m, g->op, err, "%s: a sharding or local type that does not match %s",
                           nm, gt->text);
    }
    for (uint32_t k = 0; k < gt->rank; k++) {
        int64_t idx = 0, count = 1;
        uint32_t lead = 0;
        for (uint32_t j = 0; j < s->dims[k].n_axes; j++) {
            const sp_axis_ref *r = &s->dims[k].axes[j];
            if (!is_manual(g, r->name)) {
                continue;
            }
            int32_t a = sp_mesh_axis_index(g->mesh, r->name);
            if (a < 0 || r->pre_size > 0 || lead != j) {
                return sp_op_error(g->m, g->op, err,
                                   "%s: manual axis %s must be a whole mesh axis leading its "
                                   "dimension",
                                   nm, r->name);
            }
            lead++;
            idx = idx * g->mesh->axes[a].size + g->coord[d][a];
            count *= g->mesh->axes[a].size;
        }
        if (gt->dims[k] < 0 || gt->dims[k] % count != 0 || gt->dims[k] / count != lt->dims[k]) {
            return sp_op_error(g->m, g->op, err,
                               "%s: local type %s is not %s split over the manual axes", nm,
                               lt->text, gt->text);
        }
        off[k] = idx * lt->dims[k];
    }
    return CM_OK;
}

/* Copies device block l at off out of the global value gl (out false:
 * from gl into to, which is l) or into it (out true: from l into to, which
 * is gl). */
static void manual_copy(const iv *from, iv *to, const int64_t *off, bool out)
{
    const iv *gl = out ? to : from, *l = out ? from : to;
    int64_t gst[SP_MAX_RANK], c[SP_MAX_RANK] = {0};
    strides_of(gl->dims, gl->rank, gst);
    for (size_t j = 0; j < l->n; j++) {
        int64_t gi = 0;
        for (uint32_t k = 0; k < l->rank; k++) {
            gi += (c[k] + off[k]) * gst[k];
        }
        if (out) {
            copy_elem(to, (size_t)gi, from, j);
        } else {
            copy_elem(to, j, from, (size_t)gi);
        }
        coord_next(c, l->dims, l->rank);
    }
}

/* Evaluates manual computation op on ops (its global operands) into res
 * (new references, one per result). */
static cm_status manual_eval(ictx *cx, cm_error *err, uint32_t op, iv *const *ops, iv **res)
{
    const sp_module *m = cx->m;
    const sp_op *o = &m->ops[op];
    const char *nm = o->name;
    const sp_attr *in = sp_op_attr(m, op, "in_shardings");
    const sp_attr *out = sp_op_attr(m, op, "out_shardings");
    const sp_attr *axes = sp_op_attr(m, op, "manual_axes");
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1 || in == NULL ||
        in->kind != SP_ATTR_SHARDING_LIST || in->u.shardings.n != o->n_operands || out == NULL ||
        out->kind != SP_ATTR_SHARDING_LIST || out->u.shardings.n != o->n_results ||
        axes == NULL || axes->kind != SP_ATTR_AXIS_LIST ||
        m->blocks[o->regions[0].blocks[0]].n_args != o->n_operands) {
        return sp_op_error(m, op, err, "%s: operands, shardings or region it cannot interpret",
                           nm);
    }
    mgeom *g = cm_calloc(1, sizeof *g);
    if (g == NULL) {
        return cm_error_oom(err);
    }
    g->m = m;
    g->op = op;
    g->axes = axes;
    cm_status st = CM_OK;
    for (uint32_t i = 0; st == CM_OK && i < o->n_operands + o->n_results; i++) {
        const sp_sharding *s = i < o->n_operands ? in->u.shardings.items[i]
                                                 : out->u.shardings.items[i - o->n_operands];
        const sp_mesh *sm = s == NULL             ? NULL
                            : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                                   : s->mesh;
        if (sm == NULL || (g->mesh != NULL && sm != g->mesh)) {
            st = sp_op_error(m, op, err, "%s: shardings on unknown or different meshes", nm);
        }
        g->mesh = sm;
    }
    int64_t size = g->mesh != NULL ? sp_mesh_size(g->mesh) : 0;
    const sp_attr *np = sp_attrs_get(m->attrs, m->n_attrs, "mhlo.num_partitions");
    const sp_attr *nr = sp_attrs_get(m->attrs, m->n_attrs, "mhlo.num_replicas");
    if (st == CM_OK && (size < 1 || size > MANUAL_MAX_DEV || g->mesh->n_axes > SP_MAX_RANK)) {
        st = sp_op_error(m, op, err, "%s: a mesh of %lld devices cannot be interpreted (at most "
                                     "%d)", nm, (long long)size, MANUAL_MAX_DEV);
    } else if (st == CM_OK && nr != NULL && (nr->kind != SP_ATTR_INT || nr->u.i.v != 1)) {
        st = sp_op_error(m, op, err, "%s: a module of more than one replica cannot be "
                                     "interpreted yet", nm);
    } else if (st == CM_OK && np != NULL && (np->kind != SP_ATTR_INT || np->u.i.v != size)) {
        st = sp_op_error(m, op, err, "%s: mhlo.num_partitions is not the mesh size %lld", nm,
                         (long long)size);
    }
    uint32_t n = st == CM_OK ? (uint32_t)size : 0;
    g->n = n;
    for (uint32_t d = 0; st == CM_OK && d < n; d++) {
        int64_t pos = d;
        if (g->mesh->device_ids != NULL && g->mesh->n_device_ids > 0) {
            pos = -1;
            for (uint32_t i = 0; i < g->mesh->n_device_ids; i++) {
                pos = g->mesh->device_ids[i] == (int64_t)d ? (int64_t)i : pos;
            }
            if (pos < 0) {
                st = sp_op_error(m, op, err, "%s: device %u is missing from its mesh", nm, d);
            }
        }
        for (uint32_t a = g->mesh->n_axes; st == CM_OK && a-- > 0;) {
            g->coord[d][a] = pos % g->mesh->axes[a].size;
            pos /= g->mesh->axes[a].size;
        }
    }
    uint32_t blk = o->regions[0].blocks[0];
    const sp_block *b = &m->blocks[blk];
    uint32_t na = o->n_operands, nres = o->n_results;
    iv **args = cm_calloc((size_t)n * na + 1u, sizeof(iv *));
    pjob *jobs = cm_calloc(n + 1u, sizeof *jobs);
    pthread_t *th = cm_calloc(n + 1u, sizeof *th);
    irun run;
    bool have = irun_init(&run, n, 1, n);
    if (st == CM_OK && (args == NULL || jobs == NULL || th == NULL || !have)) {
        st = cm_error_oom(err);
    }
    int64_t off[SP_MAX_RANK];
    for (uint32_t d = 0; st == CM_OK && d < n; d++) {
        for (uint32_t i = 0; st == CM_OK && i < na; i++) {
            st = manual_place(g, in->u.shardings.items[i], o->operands[i], b->first_arg + i, d,
                              off, err);
            const sp_type *lt = sp_value_type(m, b->first_arg + i);
            iv *l = st == CM_OK ? iv_new(lt->elem, lt->dims, lt->rank) : NULL;
            if (st == CM_OK && l == NULL) {
                st = cm_error_oom(err);
            }
            if (st == CM_OK) {
                manual_copy(ops[i], l, off, false);
                args[(size_t)d * na + i] = l;
            }
        }
    }
    uint32_t started = 0;
    for (uint32_t d = 0; st == CM_OK && d < n; d++) {
        jobs[d].func = SP_NONE;
        jobs[d].blk = blk;
        jobs[d].at = op;
        jobs[d].args = &args[(size_t)d * na];
        jobs[d].n_args = na;
        cm_error_clear(&jobs[d].err);
        st = proc_init(&jobs[d].P, cx, &jobs[d].err);
        if (st != CM_OK) {
            st = cm_error_oom(err);
        }
        jobs[d].P.run = &run;
        jobs[d].P.id = d;
        jobs[d].P.rep = 0;
        jobs[d].P.part = d;
    }
    if (st == CM_OK) {
        started = irun_threads(&run, jobs, th, n);
        if (started < n) {
            st = sp_op_error(m, op, err, "%s: cannot start %u threads", nm, n);
        }
    }
    /* the first failure in device order; a peer that failed only because
     * another did says less */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t d = 0; st == CM_OK && d < started; d++) {
            if (jobs[d].st != CM_OK &&
                (pass == 1 || strstr(jobs[d].err.msg, "peers failed") == NULL)) {
                st = cm_error_wrap(err, &jobs[d].err, "%s: device %u", nm, d);
            }
        }
    }
    for (uint32_t d = 0; st == CM_OK && d < n; d++) {
        if (jobs[d].n_res != nres) {
            st = sp_op_error(m, op, err, "%s: its body returns %u values for %u results", nm,
                             jobs[d].n_res, nres);
        }
    }
    for (uint32_t j = 0; st == CM_OK && j < nres; j++) {
        const sp_type *rt = sp_value_type(m, o->first_result + j);
        res[j] = iv_new(rt->elem, rt->dims, rt->rank);
        if (res[j] == NULL) {
            st = cm_error_oom(err);
            break;
        }
        uint64_t seen[MANUAL_MAX_DEV / 64] = {0}; /* manual groups already written */
        for (uint32_t d = 0; st == CM_OK && d < n; d++) {
            uint32_t gid = 0;
            for (uint32_t a = 0; a < g->mesh->n_axes; a++) {
                if (is_manual(g, g->mesh->axes[a].name)) {
                    gid = gid * (uint32_t)g->mesh->axes[a].size + (uint32_t)g->coord[d][a];
                }
            }
            if (seen[gid / 64] >> (gid % 64) & 1u) {
                continue;
            }
            seen[gid / 64] |= (uint64_t)1 << (gid % 64);
            const sp_op *ret = &m->ops[b->ops[b->n_ops - 1]];
            st = manual_place(g, out->u.shardings.items[j], o->first_result + j,
                              ret->operands[j], d, off, err);
            const iv *l = jobs[d].res[j];
            const sp_type *lt = sp_value_type(m, ret->operands[j]);
            bool same = st == CM_OK && l->kind == IV_TENSOR && l->elem == res[j]->elem &&
                        l->rank == lt->rank;
            for (uint32_t k = 0; same && k < l->rank; k++) {
                same = l->dims[k] == lt->dims[k];
            }
            if (st == CM_OK && !same) {
                st = sp_op_error(m, op, err, "%s: its body returns another type", nm);
            }
            if (st == CM_OK) {
                manual_copy(l, res[j], off, true);
            }
        }
    }
    if (st != CM_OK) {
        for (uint32_t j = 0; j < nres; j++) {
            iv_unref(res[j]);
            res[j] = NULL;
        }
    }
    for (uint32_t d = 0; jobs != NULL && d < n; d++) {
        vals_free(jobs[d].res, jobs[d].n_res);
        if (jobs[d].P.env != NULL) {
            proc_fini(&jobs[d].P);
        }
    }
    for (size_t i = 0; args != NULL && i < (size_t)n * na; i++) {
        iv_unref(args[i]);
    }
    irun_fini(&run);
    cm_free(args);
    cm_free(jobs);
    cm_free(th);
    cm_free(g);
    return st;
}

static cm_status do_manual(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    if (P->run != NULL) {
        return op_err(P, op, "%s inside interpreter.run_parallel or another manual computation "
                             "cannot be interpreted", o->name);
    }
    iv **ops;
    cm_status st = operands_of(P, op, 0, o->n_operands, &ops);
    if (st != CM_OK) {
        return st;
    }
    iv **res = cm_calloc(o->n_results + 1u, sizeof(iv *));
    st = res == NULL ? cm_error_oom(P->err) : manual_eval(P->cx, P->err, op, ops, res);
    cm_free(ops);
    if (st != CM_OK) {
        cm_free(res);
        return st;
    }
    return results_set(P, op, res, o->n_results);
}

/* Raw executor arrays (ex_int.h layout: native integers and floats, i1
 * as a byte, bf16/f16 as their bits) to and from wide values. */
static iv *iv_from_raw(const sp_type *t, const void *p)
{
    iv *v = iv_new(t->elem, t->dims, t->rank);
    for (size_t k = 0; v != NULL && k < v->n; k++) {
        switch (t->elem) {
        case SP_ELEM_F32:
            v->d.f[k] = ((const float *)p)[k];
            break;
        case SP_ELEM_F64:
            v->d.f[k] = ((const double *)p)[k];
            break;
        case SP_ELEM_BF16:
        case SP_ELEM_F16:
            v->d.f[k] = ex_half_float(((const uint16_t *)p)[k], t->elem == SP_ELEM_BF16);
            break;
        case SP_ELEM_I1:
        case SP_ELEM_UI8:
            v->d.i[k] = ((const uint8_t *)p)[k];
            break;
        case SP_ELEM_I8:
            v->d.i[k] = ((const int8_t *)p)[k];
            break;
        case SP_ELEM_I16:
            v->d.i[k] = ((const int16_t *)p)[k];
            break;
        case SP_ELEM_UI16:
            v->d.i[k] = ((const uint16_t *)p)[k];
            break;
        case SP_ELEM_I32:
            v->d.i[k] = ((const int32_t *)p)[k];
            break;
        case SP_ELEM_UI32:
            v->d.i[k] = ((const uint32_t *)p)[k];
            break;
        case SP_ELEM_I64:
        case SP_ELEM_UI64:
            memcpy(&v->d.i[k], (const char *)p + 8u * k, 8u);
            break;
        default:
            iv_unref(v);
            return NULL;
        }
    }
    return v;
}

static void iv_to_raw(const iv *v, void *p)
{
    for (size_t k = 0; k < v->n; k++) {
        switch (v->elem) {
        case SP_ELEM_F32:
            ((float *)p)[k] = (float)v->d.f[k];
            break;
        case SP_ELEM_F64:
            ((double *)p)[k] = v->d.f[k];
            break;
        case SP_ELEM_BF16:
        case SP_ELEM_F16:
            ((uint16_t *)p)[k] = ex_half_from_double(v->elem, v->d.f[k]);
            break;
        case SP_ELEM_I1:
        case SP_ELEM_UI8:
        case SP_ELEM_I8:
            ((uint8_t *)p)[k] = (uint8_t)v->d.i[k];
            break;
        case SP_ELEM_I16:
        case SP_ELEM_UI16:
            ((uint16_t *)p)[k] = (uint16_t)v->d.i[k];
            break;
        case SP_ELEM_I32:
        case SP_ELEM_UI32:
            ((uint32_t *)p)[k] = (uint32_t)v->d.i[k];
            break;
        default:
            memcpy((char *)p + 8u * k, &v->d.i[k], 8u);
            break;
        }
    }
}

cm_status ex_interp_manual(const sp_module *m, uint32_t op, const void *const *operands,
                           void *const *results, cm_error *err)
{
    const sp_op *o = &m->ops[op];
    ex_interp_report rep;
    memset(&rep, 0, sizeof rep);
    ictx cx = {m, stderr, NULL, false, &rep, PTHREAD_MUTEX_INITIALIZER, NULL};
    iv **ops = cm_calloc(o->n_operands + 1u, sizeof(iv *));
    iv **res = cm_calloc(o->n_results + 1u, sizeof(iv *));
    cm_status st = ops == NULL || res == NULL ? cm_error_oom(err) : CM_OK;
    for (uint32_t i = 0; st == CM_OK && i < o->n_operands; i++) {
        const sp_type *t = sp_value_type(m, o->operands[i]);
        ops[i] = iv_from_raw(t, operands[i]);
        if (ops[i] == NULL) {
            st = et_supported(t->elem) ? cm_error_oom(err)
                                       : sp_op_error(m, op, err, "%s: type %s", o->name, t->text);
        }
    }
    if (st == CM_OK) {
        st = manual_eval(&cx, err, op, ops, res);
    }
    for (uint32_t j = 0; st == CM_OK && j < o->n_results; j++) {
        iv_to_raw(res[j], results[j]);
    }
    for (uint32_t i = 0; ops != NULL && i < o->n_operands; i++) {
        iv_unref(ops[i]);
    }
    for (uint32_t j = 0; res != NULL && j < o->n_results; j++) {
        iv_unref(res[j]);
    }
    cm_free(ops);
    cm_free(res);
    while (cx.probes != NULL) {
        iprobe *next = cx.probes->next;
        iv_unref(cx.probes->v);
        cm_free(cx.probes);
        cx.probes = next;
    }
    pthread_mutex_destroy(&cx.mu);
    return st;
}

/* ---- checks ------------------------------------------------------------------------------ */

enum { CHK_EQ, CHK_ALMOST, CHK_CLOSE };

static void sv_text(sp_elem e, sv s, char *buf, size_t n)
{
    if (et_int(e)) {
        if (et_uns(e)) {
            snprintf(buf, n, "%llu", (unsigned long long)s.i);
        } else {
            snprintf(buf, n, "%lld", (long long)s.i);
        }
    } else if (et_cpx(e)) {
        snprintf(buf, n, "(%.9g, %.9g)", s.re, s.im);
    } else {
        snprintf(buf, n, "%.17g", s.re);
    }
}

static bool flt_same(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static bool flt_almost(double a, double b, double tol)
{
    if (flt_same(a, b)) {
        return true;
    }
    if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) {
        return false;
    }
    return fabs(a - b) <= tol * fmax(1.0, fabs(b)) || fabs(a - b) <= tol;
}

/* ULP distance of two floats of type e. */
static uint64_t ulp_dist(sp_elem e, double a, double b)
{
    if (flt_same(a, b)) {
        return 0;
    }
    if (isnan(a) || isnan(b)) {
        return UINT64_MAX;
    }
    unsigned w = et_width(e);
    uint64_t sign = UINT64_C(1) << (w - 1u);
    uint64_t ba = ex_interp_bits(e, a), bb = ex_interp_bits(e, b);
    int64_t ka = (ba & sign) ? -(int64_t)(ba & (sign - 1u)) : (int64_t)ba;
    int64_t kb = (bb & sign) ? -(int64_t)(bb & (sign - 1u)) : (int64_t)bb;
    return ka > kb ? (uint64_t)(ka - kb) : (uint64_t)(kb - ka);
}

static void check_report(iproc *P, uint32_t op, bool ok, const char *what, const char *detail)
{
    ictx *cx = P->cx;
    pthread_mutex_lock(&cx->mu);
    cx->r->n_checks++;
    if (!ok) {
        cx->r->n_failed++;
        const sp_op *o = OP(P, op);
        fprintf(cx->out, "%u:%u: %s failed: %s\n", o->line, o->col, what, detail);
    }
    pthread_mutex_unlock(&cx->mu);
}

/* Compares got with want (mode CHK_*); false with detail written when they
 * differ. */
static bool values_match(const iv *got, const iv *want, int mode, double tol, uint64_t ulo,
                         uint64_t uhi, char *detail, size_t dn)
{
    if (got->kind != IV_TENSOR || want->kind != IV_TENSOR || got->n != want->n ||
        got->rank != want->rank || et_int(got->elem) != et_int(want->elem) || got->w != want->w) {
        snprintf(detail, dn, "shapes or element types differ");
        return false;
    }
    for (uint32_t k = 0; k < got->rank; k++) {
        if (got->dims[k] != want->dims[k]) {
            snprintf(detail, dn, "shapes differ");
            return false;
        }
    }
    for (size_t j = 0; j < got->n; j++) {
        sv a = iv_get(got, j), b = iv_get(want, j);
        bool ok;
        if (et_int(got->elem)) {
            ok = a.i == b.i;
        } else if (mode == CHK_EQ) {
            ok = flt_same(a.re, b.re) && flt_same(a.im, b.im);
        } else if (mode == CHK_ALMOST) {
            ok = flt_almost(a.re, b.re, tol) && flt_almost(a.im, b.im, tol);
        } else {
            uint64_t d = ulp_dist(got->elem, a.re, b.re);
            uint64_t d2 = got->w == 2 ? ulp_dist(got->elem, a.im, b.im) : 0;
            uint64_t dm = d > d2 ? d : d2;
            ok = dm >= ulo && dm <= uhi;
        }
        if (!ok) {
            char ga[64], wa[64];
            sv_text(got->elem, a, ga, sizeof ga);
            sv_text(want->elem, b, wa, sizeof wa);
            snprintf(detail, dn, "element %zu: got %s, expected %s", j, ga, wa);
            return false;
        }
    }
    return true;
}

static cm_status do_check(iproc *P, uint32_t op, const char *name)
{
    const sp_op *o = OP(P, op);
    int mode = strstr(name, "almost") != NULL ? CHK_ALMOST
               : strstr(name, "close") != NULL ? CHK_CLOSE
                                               : CHK_EQ;
    bool is_const = strstr(name, "_const") != NULL;
    if (o->n_operands < (is_const ? 1u : 2u)) {
        return op_err(P, op, "takes %u operands", is_const ? 1u : 2u);
    }
    const iv *got = opnd(P, op, 0);
    iv *want = NULL;
    if (is_const) {
        const sp_attr *a = attr(P, op, "value");
        cm_status st = const_value(P, op, a, a != NULL && a->kind == SP_ATTR_DENSE ? a->u.dense.type
                                                                                   : 0,
                                   &want);
        if (st != CM_OK) {
            return st;
        }
    } else {
        want = iv_ref(opnd(P, op, 1));
    }
    double tol = 1e-4;
    const sp_attr *ta = attr(P, op, "tolerance");
    if (ta != NULL && ta->kind == SP_ATTR_FLOAT) {
        tol = ta->u.f.v;
    }
    uint64_t uhi = (uint64_t)int_attr(P, op, "max_ulp_difference", 3);
    uint64_t ulo = (uint64_t)int_attr(P, op, "min_ulp_difference", 0);
    char detail[256];
    bool ok = values_match(got, want, mode, tol, ulo, uhi, detail, sizeof detail);
    iv_unref(want);
    check_report(P, op, ok, name, detail);
    if (o->n_results == 1) {
        /* custom_call @check.eq(...) -> tensor<i1> */
        iv *r;
        cm_status st = new_res(P, op, 0, &r);
        if (st != CM_OK) {
            return st;
        }
        if (r->n == 1 && et_int(r->elem)) {
            r->d.i[0] = ok;
        }
        put_res(P, op, 0, r);
    }
    return CM_OK;
}

/* interpreter.probe: records its operand under probe_id (kept in memory,
 * where stablehlo-translate writes a file), and passes it through. */
static cm_status do_probe(iproc *P, uint32_t op)
{
    const sp_attr *id = attr(P, op, "probe_id");
    if (id == NULL || id->kind != SP_ATTR_STRING || OP(P, op)->n_results != 1) {
        return op_err(P, op, "has no probe_id");
    }
    iprobe *pr = cm_calloc(1, sizeof *pr);
    if (pr == NULL) {
        return cm_error_oom(P->err);
    }
    pr->id = id->u.str.s;
    pr->v = iv_ref(opnd(P, op, 0));
    ictx *cx = P->cx;
    pthread_mutex_lock(&cx->mu);
    for (const iprobe *q = cx->probes; q != NULL; q = q->next) {
        if (strcmp(q->id, pr->id) == 0) {
            pr->iter++;
        }
    }
    pr->next = cx->probes;
    cx->probes = pr;
    pthread_mutex_unlock(&cx->mu);
    put_res(P, op, 0, iv_ref(pr->v));
    return CM_OK;
}

/* check.expect_serialized_eq: the operand equals what the probe of probe_id
 * recorded at iteration `iteration` (default 0), bit for bit. */
static cm_status do_serialized_eq(iproc *P, uint32_t op)
{
    const sp_attr *id = attr(P, op, "probe_id");
    if (id == NULL || id->kind != SP_ATTR_STRING) {
        return op_err(P, op, "has no probe_id");
    }
    int64_t it = int_attr(P, op, "iteration", 0);
    const iv *want = NULL;
    ictx *cx = P->cx;
    pthread_mutex_lock(&cx->mu);
    for (const iprobe *q = cx->probes; q != NULL; q = q->next) {
        if (strcmp(q->id, id->u.str.s) == 0 && (int64_t)q->iter == it) {
            want = q->v;
        }
    }
    pthread_mutex_unlock(&cx->mu);
    char detail[256];
    bool ok;
    if (want == NULL) {
        snprintf(detail, sizeof detail, "no probe \"%s\" at iteration %lld", id->u.str.s,
                 (long long)it);
        ok = false;
    } else {
        ok = values_match(opnd(P, op, 0), want, CHK_EQ, 0, 0, 0, detail, sizeof detail);
    }
    check_report(P, op, ok, "check.expect_serialized_eq", detail);
    return CM_OK;
}

/* ---- control flow ------------------------------------------------------------------------- */

static cm_status do_while(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    iv **vars;
    cm_status st = operands_of(P, op, 0, o->n_operands, &vars);
    if (st != CM_OK) {
        return st;
    }
    uint32_t n = o->n_operands;
    for (uint32_t i = 0; i < n; i++) {
        iv_ref(vars[i]);
    }
    for (uint64_t iter = 0; st == CM_OK; iter++) {
        iv **c;
        uint32_t nc;
        st = run_region(P, op, 0, vars, n, &c, &nc);
        if (st != CM_OK) {
            break;
        }
        bool go = nc == 1 && c[0]->kind == IV_TENSOR && c[0]->n == 1 && c[0]->d.i[0] != 0;
        if (nc != 1) {
            st = op_err(P, op, "its condition does not return one value");
        }
        vals_free(c, nc);
        if (st != CM_OK || !go) {
            break;
        }
        iv **nv;
        uint32_t nn;
        st = run_region(P, op, 1, vars, n, &nv, &nn);
        if (st == CM_OK && nn != n) {
            vals_free(nv, nn);
            st = op_err(P, op, "its body returns %u values for %u", nn, n);
        }
        if (st != CM_OK) {
            break;
        }
        vals_free(vars, n);
        vars = nv;
    }
    if (st != CM_OK) {
        vals_free(vars, n);
        return st;
    }
    return results_set(P, op, vars, n);
}

/* Slice t (0 <= t < dims[d]) of v along dimension d, or (with put) writes
 * x into that slice of v: the slots at (outer, t, inner). */
static void scan_slice(iv *v, uint32_t d, int64_t t, iv *x, bool put)
{
    size_t outer = 1, inner = v->w;
    for (uint32_t k = 0; k < d; k++) {
        outer *= (size_t)v->dims[k];
    }
    for (uint32_t k = d + 1u; k < v->rank; k++) {
        inner *= (size_t)v->dims[k];
    }
    size_t n = (size_t)v->dims[d];
    uint64_t *vs = v->d.p, *xs = x->d.p;
    for (size_t o = 0; o < outer; o++) {
        uint64_t *at = vs + (o * n + (size_t)t) * inner;
        if (put) {
            memcpy(at, xs + o * inner, inner * sizeof *at);
        } else {
            memcpy(xs + o * inner, at, inner * sizeof *at);
        }
    }
}

/* chlo.scan: for each position t along `dimension` (last to first when
 * is_reverse), the body takes the inputs' slices at t and the carries and
 * returns the outputs' slices at t and the new carries; the results are
 * the outputs, then the final carries. */
static cm_status do_scan(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    const sp_module *m = P->cx->m;
    cm_arena ar;
    cm_arena_init(&ar, 0);
    const int64_t *seg;
    uint32_t nseg;
    bool have = ints(P, op, "operandSegmentSizes", &seg, &nseg, &ar);
    int64_t n_in = have && nseg == 2 ? seg[0] : -1, n_c = have && nseg == 2 ? seg[1] : -1;
    cm_arena_fini(&ar);
    int64_t d = int_attr(P, op, "dimension", -1);
    if (n_in < 0 || n_c < 0 || n_in + n_c != (int64_t)o->n_operands || n_c > o->n_results ||
        d < 0 || o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        return op_err(P, op, "its dimension, segment sizes or body cannot be read");
    }
    uint32_t ni = (uint32_t)n_in, nc = (uint32_t)n_c, no = o->n_results - nc;
    const sp_block *body = &m->blocks[o->regions[0].blocks[0]];
    if (body->n_args != ni + nc) {
        return op_err(P, op, "its body takes %u arguments, not %u", body->n_args, ni + nc);
    }
    int64_t len = -1;
    for (uint32_t j = 0; j < ni + no; j++) {
        const sp_type *t = j < ni ? sp_value_type(m, o->operands[j])
                                  : &m->types[m->values[o->first_result + (j - ni)].type];
        if (t->kind != SP_TYPE_TENSOR || (int64_t)t->rank <= d || t->dims[d] < 0 ||
            (len >= 0 && t->dims[d] != len)) {
            return op_err(P, op, "its inputs and outputs do not share scan dimension %lld",
                          (long long)d);
        }
        len = t->dims[d];
    }
    if (len < 0) {
        return op_err(P, op, "it has neither inputs nor outputs");
    }
    iv **outs = cm_calloc(o->n_results + 1u, sizeof(iv *)), **args = cm_calloc(ni + nc + 1u, sizeof(iv *));
    cm_status st = outs != NULL && args != NULL ? CM_OK : cm_error_oom(P->err);
    for (uint32_t j = 0; st == CM_OK && j < no; j++) {
        st = new_res(P, op, j, &outs[j]);
    }
    for (uint32_t k = 0; st == CM_OK && k < nc; k++) {
        args[ni + k] = iv_ref(opnd(P, op, ni + k));
    }
    bool rev = bool_attr(P, op, "is_reverse");
    for (int64_t step = 0; st == CM_OK && step < len; step++) {
        int64_t t = rev ? len - 1 - step : step;
        for (uint32_t j = 0; st == CM_OK && j < ni; j++) {
            iv_unref(args[j]);
            args[j] = NULL;
            iv *in = opnd(P, op, j);
            st = new_of_type(P, op, m->values[body->first_arg + j].type, &args[j]);
            if (st == CM_OK && (args[j]->n * args[j]->w) * (size_t)len != in->n * in->w) {
                st = op_err(P, op, "body argument %u does not match a slice of input %u", j, j);
            }
            if (st == CM_OK) {
                scan_slice(in, (uint32_t)d, t, args[j], false);
            }
        }
        iv **res = NULL;
        uint32_t nr = 0;
        if (st == CM_OK) {
            st = run_block(P, o->regions[0].blocks[0], args, ni + nc, &res, &nr);
        }
        if (st == CM_OK && nr != no + nc) {
            st = op_err(P, op, "its body returns %u values for %u", nr, no + nc);
        }
        for (uint32_t j = 0; st == CM_OK && j < no; j++) {
            if (res[j]->kind != IV_TENSOR || res[j]->n * (size_t)len != outs[j]->n ||
                res[j]->w != outs[j]->w) {
                st = op_err(P, op, "body result %u does not match a slice of output %u", j, j);
            } else {
                scan_slice(outs[j], (uint32_t)d, t, res[j], true);
            }
        }
        if (st == CM_OK) {
            for (uint32_t k = 0; k < nc; k++) {
                iv_unref(args[ni + k]);
                args[ni + k] = iv_ref(res[no + k]);
            }
        }
        vals_free(res, nr);
    }
    if (st == CM_OK) {
        for (uint32_t k = 0; k < nc; k++) {
            outs[no + k] = args[ni + k];
            args[ni + k] = NULL;
        }
        vals_free(args, ni + nc);
        return results_set(P, op, outs, no + nc);
    }
    if (args != NULL) {
        vals_free(args, ni + nc);
    }
    if (outs != NULL) {
        vals_free(outs, o->n_results);
    }
    return st;
}

static cm_status do_branch(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    const iv *p = opnd(P, op, 0);
    if (p->kind != IV_TENSOR || p->n != 1 || !et_int(p->elem)) {
        return op_err(P, op, "its predicate or index is not an integer scalar");
    }
    uint32_t br;
    if (o->kind == SP_OP_IF) {
        br = p->d.i[0] != 0 ? 0u : 1u;
    } else {
        int64_t i = p->d.i[0];
        br = i < 0 || i >= (int64_t)o->n_regions ? o->n_regions - 1u : (uint32_t)i;
    }
    iv **res;
    uint32_t nr;
    cm_status st = run_region(P, op, br, NULL, 0, &res, &nr);
    if (st != CM_OK) {
        return st;
    }
    return results_set(P, op, res, nr);
}

static cm_status do_call_sym(iproc *P, uint32_t op, const char *key, uint32_t first)
{
    const sp_op *o = OP(P, op);
    const sp_attr *c = attr(P, op, key);
    uint32_t f = c != NULL && c->kind == SP_ATTR_SYMBOL ? sp_module_func(P->cx->m, c->u.sym)
                                                        : SP_NONE;
    if (f == SP_NONE) {
        return op_err(P, op, "calls a function the module does not have");
    }
    iv **args;
    cm_status st = operands_of(P, op, first, o->n_operands - first, &args);
    if (st != CM_OK) {
        return st;
    }
    iv **res;
    uint32_t nr;
    st = call_func(P, op, f, args, o->n_operands - first, &res, &nr);
    cm_free(args);
    if (st != CM_OK) {
        return st;
    }
    return results_set(P, op, res, nr);
}

static cm_status pass_through(iproc *P, uint32_t op)
{
    const sp_op *o = OP(P, op);
    if (o->n_operands != o->n_results) {
        return op_err(P, op, "unexpected operand or result count");
    }
    for (uint32_t i = 0; i < o->n_operands; i++) {
        put_res(P, op, i, iv_ref(opnd(P, op, i)));
    }
    return CM_OK;
}

static cm_status scalar_result(iproc *P, uint32_t op, int64_t v)
{
    iv *r;
    cm_status st = new_res(P, op, 0, &r);
    if (st != CM_OK) {
        return st;
    }
    if (r->n != 1 || !et_int(r->elem)) {
        iv_unref(r);
        return op_err(P, op, "its result is not an integer scalar");
    }
    r->d.i[0] = et_wrap(r->elem, v);
    put_res(P, op, 0, r);
    return CM_OK;
}

/* ---- the op switch ------------------------------------------------------------------------ */

static cm_status eval_op_in(iproc *P, uint32_t op, cm_arena *ar)
{
    const sp_module *m = P->cx->m;
    const sp_op *o = OP(P, op);
    sp_op_kind k = (sp_op_kind)o->kind;
    for (uint32_t i = 0; i < o->n_operands; i++) {
        if (P->env[o->operands[i]] == NULL) {
            return op_err(P, op, "uses a value that was never computed");
        }
    }
    if (ex_interp_ew_known(k)) {
        return do_ew(P, op);
    }
    switch (k) {
    case SP_OP_CONSTANT:
    case SP_OP_SDY_CONSTANT: { /* what propagation makes of a constant */
        iv *t;
        cm_status st = const_value(P, op, attr(P, op, "value"), m->values[o->first_result].type, &t);
        if (st == CM_OK) {
            put_res(P, op, 0, t);
        }
        return st;
    }
    case SP_OP_IOTA:
    case SP_OP_DYNAMIC_IOTA:
        return do_iota(P, op);
    case SP_OP_FFT:
        return do_fft(P, op, ar);
    case SP_OP_TRIANGULAR_SOLVE:
        return do_triangular_solve(P, op);
    case SP_OP_RESHAPE:
    case SP_OP_DYNAMIC_RESHAPE:
    case SP_OP_BROADCAST_IN_DIM:
    case SP_OP_DYNAMIC_BROADCAST_IN_DIM:
    case SP_OP_BROADCAST:
    case SP_OP_TRANSPOSE:
    case SP_OP_SLICE:
    case SP_OP_REVERSE:
        return do_movement(P, op, ar);
    case SP_OP_CONCATENATE:
        return do_concatenate(P, op);
    case SP_OP_PAD:
    case SP_OP_DYNAMIC_PAD:
        return do_pad(P, op, ar);
    case SP_OP_DYNAMIC_SLICE:
        return do_dynamic_slice(P, op);
    case SP_OP_DYNAMIC_UPDATE_SLICE:
        return do_dynamic_update_slice(P, op);
    case SP_OP_GATHER:
    case SP_OP_DYNAMIC_GATHER:
        return do_gather(P, op, ar);
    case SP_OP_SCATTER:
        return do_scatter(P, op);
    case SP_OP_REDUCE:
        return do_reduce(P, op, ar);
    case SP_OP_REDUCE_WINDOW:
        return do_reduce_window(P, op);
    case SP_OP_SELECT_AND_SCATTER:
        return do_select_and_scatter(P, op);
    case SP_OP_SORT:
        return do_sort(P, op);
    case SP_OP_MAP:
        return do_map(P, op);
    case SP_OP_DOT_GENERAL:
    case SP_OP_DOT:
        return do_dot(P, op);
    case SP_OP_CONVOLUTION:
    case SP_OP_DYNAMIC_CONV:
        return do_conv(P, op, ar);
    case SP_OP_UNIFORM_QUANTIZE:
    case SP_OP_UNIFORM_DEQUANTIZE:
        return do_uniform_q(P, op);
    case SP_OP_BITCAST_CONVERT:
        return do_bitcast(P, op);
    case SP_OP_REDUCE_PRECISION:
        return do_reduce_precision(P, op);
    case SP_OP_ALL_REDUCE:
    case SP_OP_ALL_GATHER:
    case SP_OP_ALL_TO_ALL:
    case SP_OP_REDUCE_SCATTER:
    case SP_OP_COLLECTIVE_PERMUTE:
    case SP_OP_COLLECTIVE_BROADCAST:
        return do_collective(P, op);
    case SP_OP_SEND:
        return do_send(P, op);
    case SP_OP_RECV:
        return do_recv(P, op);
    case SP_OP_INFEED:
        return do_infeed(P, op);
    case SP_OP_OUTFEED: /* the host side is not modelled: the values go nowhere */
        return token_result(P, op, 0);
    case SP_OP_PARTITION_ID:
        return scalar_result(P, op, P->part);
    case SP_OP_REPLICA_ID:
        return scalar_result(P, op, P->rep);
    case SP_OP_GET_DIMENSION_SIZE: {
        const iv *a = opnd(P, op, 0);
        int64_t d = int_attr(P, op, "dimension", -1);
        if (d < 0 || d >= (int64_t)a->rank) {
            return op_err(P, op, "dimension is out of range");
        }
        return scalar_result(P, op, a->dims[d]);
    }
    case SP_OP_WHILE:
        return do_while(P, op);
    case SP_OP_IF:
    case SP_OP_CASE:
        return do_branch(P, op);
    case SP_OP_FUNC_CALL:
        return do_call_sym(P, op, "callee", 0);
    case SP_OP_COMPOSITE:
        return do_call_sym(P, op, "decomposition", 0);
    case SP_OP_OPTIMIZATION_BARRIER:
        return pass_through(P, op);
    case SP_OP_SDY_MANUAL_COMPUTATION:
        return do_manual(P, op);
    case SP_OP_AFTER_ALL:
    case SP_OP_CREATE_TOKEN: {
        iv *t = iv_special(IV_TOKEN, 0);
        if (t == NULL) {
            return cm_error_oom(P->err);
        }
        put_res(P, op, 0, t);
        return CM_OK;
    }
    case SP_OP_TUPLE: {
        iv *t = iv_special(IV_TUPLE, o->n_operands);
        if (t == NULL) {
            return cm_error_oom(P->err);
        }
        for (uint32_t i = 0; i < o->n_operands; i++) {
            t->items[i] = iv_ref(opnd(P, op, i));
        }
        put_res(P, op, 0, t);
        return CM_OK;
    }
    case SP_OP_GET_TUPLE_ELEMENT: {
        const iv *t = opnd(P, op, 0);
        int64_t i = int_attr(P, op, "index", -1);
        if (t->kind != IV_TUPLE || i < 0 || i >= (int64_t)t->n_items) {
            return op_err(P, op, "index is out of range");
        }
        put_res(P, op, 0, iv_ref(t->items[i]));
        return CM_OK;
    }
    case SP_OP_CUSTOM_CALL: {
        const sp_attr *t = attr(P, op, "call_target_name");
        if (t != NULL && t->kind == SP_ATTR_STRING && strncmp(t->u.str.s, "check.", 6) == 0) {
            return do_check(P, op, t->u.str.s);
        }
        return op_err(P, op, "custom_call @%s cannot be interpreted",
                      t != NULL && t->kind == SP_ATTR_STRING ? t->u.str.s : "?");
    }
    default:
        break;
    }
    if (strcmp(o->name, "check.expect_serialized_eq") == 0) {
        return do_serialized_eq(P, op);
    }
    if (strncmp(o->name, "check.expect_", 13) == 0) {
        return do_check(P, op, o->name);
    }
    if (strcmp(o->name, "chlo.ragged_dot") == 0) {
        return do_ragged_dot(P, op, ar);
    }
    if (strcmp(o->name, "chlo.scan") == 0) {
        return do_scan(P, op);
    }
    if (strcmp(o->name, "stablehlo.collective_reduce") == 0) {
        return do_collective(P, op);
    }
    if (strcmp(o->name, "interpreter.run_parallel") == 0) {
        return do_run_parallel(P, op);
    }
    if (strcmp(o->name, "interpreter.probe") == 0) {
        return do_probe(P, op);
    }
    if (strcmp(o->name, "interpreter.print") == 0 && o->n_operands == 1) {
        /* as stablehlo-translate: the operand as MLIR prints it, up to its
         * "= " (for a block argument, which has none, its first character) */
        cm_buf name;
        cm_buf_init(&name);
        uint32_t v = o->operands[0];
        if (m->values[v].def == SP_NONE) {
            cm_buf_puts(&name, "<");
        } else {
            sp_mlir_value_name(m, v, &name);
            cm_buf_puts(&name, " = ");
        }
        if (name.oom) {
            cm_buf_fini(&name);
            return op_err(P, op, "out of memory");
        }
        print_value(P->cx, opnd(P, op, 0), sp_value_type(m, v)->text, name.data);
        cm_buf_fini(&name);
        return CM_OK;
    }
    return op_err(P, op, "op %s cannot be interpreted yet", o->name);
}

static cm_status eval_op(iproc *P, uint32_t op)
{
    cm_arena ar;
    cm_arena_init(&ar, 0);
    cm_status st = eval_op_in(P, op, &ar);
    cm_arena_fini(&ar);
    return st;
}

/* ---- entry ------------------------------------------------------------------------------- */

/* ---- printing values ------------------------------------------------------------------ */

static void print_scalar(FILE *f, const iv *t, size_t k)
{
    sv v = iv_get(t, k);
    if (t->elem == SP_ELEM_I1) {
        fputs(v.i != 0 ? "true" : "false", f);
    } else if (et_int(t->elem)) {
        if (et_uns(t->elem)) {
            fprintf(f, "%llu", (unsigned long long)(uint64_t)v.i);
        } else {
            fprintf(f, "%lld", (long long)v.i);
        }
    } else if (t->w == 2) {
        fprintf(f, "[%e, %e]", v.re, v.im);
    } else {
        fprintf(f, "%e", v.re);
    }
}

/* The elements of t from flat offset at, dims from d on, nested lists
 * indented by ind spaces (the reference interpreter's layout). */
static void print_level(FILE *f, const iv *t, uint32_t d, size_t at, const int64_t *st,
                        unsigned ind)
{
    if (t->dims[d] == 0) {
        fputs("[]", f);
        return;
    }
    if (d + 1u == t->rank) {
        fputc('[', f);
        for (int64_t i = 0; i < t->dims[d]; i++) {
            if (i > 0) {
                fputs(", ", f);
            }
            print_scalar(f, t, at + (size_t)i);
        }
        fputc(']', f);
        return;
    }
    fputs("[\n", f);
    for (int64_t i = 0; i < t->dims[d]; i++) {
        fprintf(f, "%*s", (int)(ind + 2u), "");
        print_level(f, t, d + 1u, at + (size_t)(i * st[d]), st, ind + 2u);
        fputs(i + 1 < t->dims[d] ? ",\n" : "\n", f);
    }
    fprintf(f, "%*s]", (int)ind, "");
}

/* t's elements as a dense attribute's body (MLIR's DenseElementsAttr
 * printing: a splat when all are equal, nested lists, complex pairs). */
static void dense_level(cm_buf *b, const iv *t, uint32_t d, size_t at, const int64_t *st)
{
    if (d == t->rank) {
        sv v = iv_get(t, at);
        if (t->elem == SP_ELEM_I1) {
            cm_buf_puts(b, v.i != 0 ? "true" : "false");
        } else if (et_int(t->elem)) {
            if (et_uns(t->elem)) {
                cm_buf_printf(b, "%llu", (unsigned long long)(uint64_t)v.i);
            } else {
                cm_buf_printf(b, "%lld", (long long)v.i);
            }
        } else if (t->w == 2) {
            sp_elem part = t->elem == SP_ELEM_C64 ? SP_ELEM_F32 : SP_ELEM_F64;
            cm_buf_puts(b, "(");
            sp_mlir_print_float_value(b, v.re, part);
            cm_buf_puts(b, ",");
            sp_mlir_print_float_value(b, v.im, part);
            cm_buf_puts(b, ")");
        } else {
            sp_mlir_print_float_value(b, v.re, t->elem);
        }
        return;
    }
    cm_buf_puts(b, "[");
    for (int64_t i = 0; i < t->dims[d]; i++) {
        if (i > 0) {
            cm_buf_puts(b, ", ");
        }
        dense_level(b, t, d + 1u, at + (size_t)(i * st[d]), st);
    }
    cm_buf_puts(b, "]");
}

static bool all_equal(const iv *t)
{
    for (size_t k = 1; k < t->n; k++) {
        sv a = iv_get(t, 0), c = iv_get(t, k);
        if (a.i != c.i || memcmp(&a.re, &c.re, sizeof a.re) != 0 ||
            memcmp(&a.im, &c.im, sizeof a.im) != 0) {
            return false;
        }
    }
    return true;
}

static void print_dense(FILE *f, const iv *t, const char *type_text)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "dense<");
    if (t->n == 0) {
        /* no elements: an empty body */
    } else if (all_equal(t)) {
        iv one = *t;
        one.rank = 0;
        dense_level(&b, &one, 0, 0, NULL);
    } else {
        int64_t st[SP_MAX_RANK];
        strides_of(t->dims, t->rank, st);
        dense_level(&b, t, 0, 0, st);
    }
    cm_buf_puts(&b, "> : ");
    cm_buf_puts(&b, type_text);
    if (!b.oom) {
        fprintf(f, "%s\n", b.data);
    }
    cm_buf_fini(&b);
}

static void print_value(ictx *cx, const iv *t, const char *type_text, const char *prefix)
{
    FILE *f = cx->results;
    if (f == NULL) {
        return;
    }
    pthread_mutex_lock(&cx->mu);
    fputs(prefix, f);
    if (t->kind != IV_TENSOR) {
        fprintf(f, "%s\n", type_text);
    } else if (cx->dense && prefix[0] == '\0') {
        print_dense(f, t, type_text);
    } else if (t->rank == 0) {
        fprintf(f, "%s {", type_text);
        print_scalar(f, t, 0);
        fputs("}\n", f);
    } else {
        int64_t st[SP_MAX_RANK];
        strides_of(t->dims, t->rank, st);
        fprintf(f, "%s {\n  ", type_text);
        print_level(f, t, 0, 0, st, 2);
        fputs("\n}\n", f);
    }
    pthread_mutex_unlock(&cx->mu);
}

cm_status ex_interp_module(const sp_module *m, FILE *out, ex_interp_report *r, cm_error *err)
{
    ex_interp_opts o = {NULL, 0, NULL, false};
    return ex_interp_run(m, &o, out, r, err);
}

cm_status ex_interp_run(const sp_module *m, const ex_interp_opts *o, FILE *out,
                        ex_interp_report *r, cm_error *err)
{
    memset(r, 0, sizeof *r);
    ictx cx = {m, out, o->results, o->dense, r, PTHREAD_MUTEX_INITIALIZER, NULL};
    uint32_t entries[4096];
    uint32_t n = 0;
    uint32_t mainf = sp_module_func(m, "main");
    const sp_block *body = &m->blocks[m->body];
    if (mainf != SP_NONE) {
        entries[n++] = mainf;
    } else {
        for (uint32_t i = 0; i < body->n_ops && n < 4096; i++) {
            uint32_t f = body->ops[i];
            const sp_type *ft = m->ops[f].kind == SP_OP_FUNC_FUNC ? sp_func_type(m, f) : NULL;
            if (ft != NULL && ft->n_inputs == 0) {
                entries[n++] = f;
            }
        }
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; st == CM_OK && i < n; i++) {
        const sp_type *ft = sp_func_type(m, entries[i]);
        uint32_t na = o->args != NULL && entries[i] == mainf ? o->n_args : 0;
        if (ft == NULL || ft->n_inputs != na) {
            if (na == 0) {
                st = sp_op_error(m, entries[i], err, "an entry function that takes arguments "
                                                     "cannot be interpreted without them");
            } else {
                st = sp_op_error(m, entries[i], err, "main takes %u arguments, given %u",
                                 ft != NULL ? ft->n_inputs : 0, na);
            }
            break;
        }
        iproc P;
        st = proc_init(&P, &cx, err);
        if (st != CM_OK) {
            break;
        }
        iv **args = cm_calloc(na + 1u, sizeof(iv *));
        if (args == NULL) {
            st = cm_error_oom(err);
        }
        for (uint32_t k = 0; st == CM_OK && k < na; k++) {
            const sp_attr *a = o->args[k];
            uint32_t want = ft->inputs[k];
            if (a == NULL || a->kind != SP_ATTR_DENSE || a->u.dense.type != want) {
                st = sp_op_error(m, entries[i], err, "argument %u is not a dense %s", k,
                                 m->types[want].text);
            } else {
                st = const_value(&P, entries[i], a, want, &args[k]);
            }
        }
        iv **res = NULL;
        uint32_t nr = 0;
        if (st == CM_OK) {
            st = call_func(&P, entries[i], entries[i], args, na, &res, &nr);
        }
        for (uint32_t k = 0; st == CM_OK && k < nr && ft != NULL && k < ft->n_results; k++) {
            print_value(&cx, res[k], m->types[ft->results[k]].text, "");
        }
        vals_free(args, na);
        vals_free(res, nr);
        proc_fini(&P);
        r->n_funcs++;
    }
    while (cx.probes != NULL) {
        iprobe *next = cx.probes->next;
        iv_unref(cx.probes->v);
        cm_free(cx.probes);
        cx.probes = next;
    }
    pthread_mutex_destroy(&cx.mu);
    return st;
}

/* ---- the executor's per-process programs and collective bodies -------------------------- */

cm_status ex_interp_spmd(const sp_module *m, uint32_t n_rep, uint32_t n_part,
                         const void *const *args, void *const *results, FILE *fails,
                         ex_interp_report *r, cm_error *err)
{
    memset(r, 0, sizeof *r);
    uint32_t f = sp_module_func(m, "main");
    const sp_type *ft = f != SP_NONE ? sp_func_type(m, f) : NULL;
    if (ft == NULL) {
        return cm_error_set(err, CM_EINVAL, NULL, "the module has no function @main");
    }
    if (n_rep == 0 || n_part == 0 || (uint64_t)n_rep * n_part > 256) {
        return sp_op_error(m, f, err,
                           "a grid of %u replicas x %u partitions cannot be "
                           "interpreted (at most 256 processes)",
                           n_rep, n_part);
    }
    uint32_t n = n_rep * n_part, na = ft->n_inputs, nres = ft->n_results;
    ictx cx = {m, fails != NULL ? fails : stderr, NULL, false, r, PTHREAD_MUTEX_INITIALIZER, NULL};
    iv **argv = cm_calloc(na + 1u, sizeof(iv *));
    pjob *jobs = cm_calloc(n + 1u, sizeof *jobs);
    pthread_t *th = cm_calloc(n + 1u, sizeof *th);
    irun run;
    bool have = irun_init(&run, n, n_rep, n_part);
    cm_status st = argv == NULL || jobs == NULL || th == NULL || !have ? cm_error_oom(err) : CM_OK;
    /* every process takes the same arguments (docs/executor.md) */
    for (uint32_t i = 0; st == CM_OK && i < na; i++) {
        const sp_type *t = &m->types[ft->inputs[i]];
        argv[i] = iv_from_raw(t, args[i]);
        if (argv[i] == NULL) {
            st = et_supported(t->elem) ? cm_error_oom(err)
                                       : sp_op_error(m, f, err, "argument %u: type %s", i, t->text);
        }
    }
    for (uint32_t d = 0; st == CM_OK && d < n; d++) {
        jobs[d].func = f;
        jobs[d].at = f;
        jobs[d].args = argv;
        jobs[d].n_args = na;
        cm_error_clear(&jobs[d].err);
        st = proc_init(&jobs[d].P, &cx, &jobs[d].err);
        if (st != CM_OK) {
            st = cm_error_oom(err);
        }
        jobs[d].P.run = &run;
        jobs[d].P.id = d;
        jobs[d].P.rep = d / n_part;
        jobs[d].P.part = d % n_part;
    }
    uint32_t started = 0;
    if (st == CM_OK) {
        started = irun_threads(&run, jobs, th, n);
        if (started < n) {
            st = sp_op_error(m, f, err, "cannot start %u threads", n);
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t d = 0; st == CM_OK && d < started; d++) {
            if (jobs[d].st != CM_OK &&
                (pass == 1 || strstr(jobs[d].err.msg, "peers failed") == NULL)) {
                st = cm_error_wrap(err, &jobs[d].err, "process %u (replica %u, partition %u)", d,
                                   d / n_part, d % n_part);
            }
        }
    }
    for (uint32_t d = 0; st == CM_OK && d < n; d++) {
        if (jobs[d].n_res != nres) {
            st = sp_op_error(m, f, err, "main returns %u values, its type says %u", jobs[d].n_res,
                             nres);
        }
        for (uint32_t j = 0; st == CM_OK && j < nres; j++) {
            const iv *v = jobs[d].res[j];
            const sp_type *t = &m->types[ft->results[j]];
            bool same = v->kind == IV_TENSOR && v->elem == t->elem && v->rank == t->rank;
            for (uint32_t k = 0; same && k < v->rank; k++) {
                same = v->dims[k] == t->dims[k];
            }
            if (!same) {
                st = sp_op_error(m, f, err, "process %u: result %u is not a %s", d, j, t->text);
            } else {
                iv_to_raw(v, results[(size_t)d * nres + j]);
            }
        }
    }
    for (uint32_t d = 0; jobs != NULL && d < n; d++) {
        vals_free(jobs[d].res, jobs[d].n_res);
        if (jobs[d].P.env != NULL) {
            proc_fini(&jobs[d].P);
        }
    }
    vals_free(argv, na);
    irun_fini(&run);
    cm_free(jobs);
    cm_free(th);
    while (cx.probes != NULL) {
        iprobe *next = cx.probes->next;
        iv_unref(cx.probes->v);
        cm_free(cx.probes);
        cx.probes = next;
    }
    pthread_mutex_destroy(&cx.mu);
    return st;
}

/* One scalar of an executor array (iv_from_raw's layout) and back. */
static sv raw_get(const sp_type *t, const void *p, size_t k)
{
    sv s = {0, 0, 0};
    switch (t->elem) {
    case SP_ELEM_F32:
        s.re = ((const float *)p)[k];
        break;
    case SP_ELEM_F64:
        s.re = ((const double *)p)[k];
        break;
    case SP_ELEM_BF16:
    case SP_ELEM_F16:
        s.re = ex_half_float(((const uint16_t *)p)[k], t->elem == SP_ELEM_BF16);
        break;
    case SP_ELEM_I1:
    case SP_ELEM_UI8:
        s.i = ((const uint8_t *)p)[k];
        break;
    case SP_ELEM_I8:
        s.i = ((const int8_t *)p)[k];
        break;
    case SP_ELEM_I16:
        s.i = ((const int16_t *)p)[k];
        break;
    case SP_ELEM_UI16:
        s.i = ((const uint16_t *)p)[k];
        break;
    case SP_ELEM_I32:
        s.i = ((const int32_t *)p)[k];
        break;
    case SP_ELEM_UI32:
        s.i = ((const uint32_t *)p)[k];
        break;
    default:
        memcpy(&s.i, (const char *)p + 8u * k, 8u);
        break;
    }
    return s;
}

static bool raw_elem_ok(sp_elem e)
{
    switch (e) {
    case SP_ELEM_F32:
    case SP_ELEM_F64:
    case SP_ELEM_BF16:
    case SP_ELEM_F16:
    case SP_ELEM_I1:
    case SP_ELEM_UI8:
    case SP_ELEM_I8:
    case SP_ELEM_I16:
    case SP_ELEM_UI16:
    case SP_ELEM_I32:
    case SP_ELEM_UI32:
    case SP_ELEM_I64:
    case SP_ELEM_UI64:
        return true;
    default:
        return false;
    }
}

bool ex_interp_fold_ok(const sp_module *m, uint32_t op)
{
    const sp_op *o = &m->ops[op];
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1 || o->n_operands == 0) {
        return false;
    }
    const sp_block *b = &m->blocks[o->regions[0].blocks[0]];
    sp_elem e = sp_value_type(m, o->operands[0])->elem;
    if (b->n_args != 2 || b->n_ops == 0 || !raw_elem_ok(e)) {
        return false;
    }
    for (uint32_t i = 0; i < 2; i++) {
        const sp_type *t = sp_value_type(m, b->first_arg + i);
        if (t->kind != SP_TYPE_TENSOR || t->rank != 0 || t->elem != e) {
            return false;
        }
    }
    const sp_op *ret = &m->ops[b->ops[b->n_ops - 1]];
    if (ret->kind != SP_OP_RETURN || ret->n_operands != 1) {
        return false;
    }
    const sp_type *rt = sp_value_type(m, ret->operands[0]);
    return rt->kind == SP_TYPE_TENSOR && rt->rank == 0 && rt->elem == e;
}

cm_status ex_interp_fold(const sp_module *m, uint32_t op, void *acc, const void *src, size_t n,
                         cm_error *err)
{
    const sp_type *t = sp_value_type(m, m->ops[op].operands[0]);
    ex_interp_report rep;
    memset(&rep, 0, sizeof rep);
    ictx cx = {m, stderr, NULL, false, &rep, PTHREAD_MUTEX_INITIALIZER, NULL};
    iproc P;
    cm_status st = proc_init(&P, &cx, err);
    if (st != CM_OK) {
        pthread_mutex_destroy(&cx.mu);
        return st;
    }
    rbody b;
    st = body_init(&P, op, 0, 2, 1, &b);
    iv *cell = st == CM_OK ? iv_new(t->elem, NULL, 0) : NULL; /* rounds as the type does */
    if (st == CM_OK && cell == NULL) {
        st = cm_error_oom(err);
    }
    for (size_t k = 0; st == CM_OK && k < n; k++) {
        sv in[2] = {raw_get(t, acc, k), raw_get(t, src, k)}, out;
        st = body_call(&P, &b, in, &out);
        if (st == CM_OK) {
            iv_set(cell, 0, out);
            iv_to_raw(cell, (char *)acc + k * sp_elem_bytes(t->elem));
        }
    }
    iv_unref(cell);
    body_fini(&b);
    proc_fini(&P);
    while (cx.probes != NULL) {
        iprobe *next = cx.probes->next;
        iv_unref(cx.probes->v);
        cm_free(cx.probes);
        cx.probes = next;
    }
    pthread_mutex_destroy(&cx.mu);
    return st;
}

cm_status ex_interp_check(const sp_module *m, uint32_t op, const void *const *operands, FILE *fails,
                          ex_interp_report *r, cm_error *err)
{
    const sp_op *o = &m->ops[op];
    ictx cx = {m, fails != NULL ? fails : stderr, NULL, false, r, PTHREAD_MUTEX_INITIALIZER, NULL};
    iproc P;
    cm_status st = proc_init(&P, &cx, err);
    for (uint32_t i = 0; st == CM_OK && i < o->n_operands; i++) {
        const sp_type *t = sp_value_type(m, o->operands[i]);
        iv *v = iv_from_raw(t, operands[i]);
        if (v == NULL) {
            st = et_supported(t->elem) ? cm_error_oom(err)
                                       : sp_op_error(m, op, err, "%s: type %s", o->name, t->text);
            break;
        }
        put(&P, o->operands[i], v);
    }
    if (st == CM_OK) {
        st = eval_op(&P, op);
    }
    if (P.env != NULL) {
        proc_fini(&P);
    }
    pthread_mutex_destroy(&cx.mu);
    return st;
}
