/* SPDX-License-Identifier: Apache-2.0
 * executor: SPMD execution of a partitioned module on worker threads.
 * A single-threaded preparation pass decodes every op of main and of the
 * blocks it runs (called functions, while/case/if regions, manual
 * computation bodies: attributes,
 * device groups, constants) and every value's per-device block (offset and
 * local shape from its sharding); then one worker per device walks the ops in
 * order on its own buffers, every device through the same control flow.
 * Collectives synchronise with a barrier before (every operand is ready) and
 * after (every peer is done reading), so a buffer can be freed after its
 * last use. A failing worker keeps taking the barriers, so the others never
 * wait forever. */
#define _GNU_SOURCE /* pthread_attr_setaffinity_np, sched_getaffinity (Linux) */
#include "ex_exec.h"

#include <sched.h>

#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ex_blas.h"
#include "ex_kern_int.h"
#include "ex_mem_int.h"
#include "ex_par_int.h"
#include "ex_timing_int.h"
#include "sp_collectives.h"
#include "sp_cost.h"
#include "sp_ops.h"
#include "sp_pipeline.h"
#include "sp_prop.h"
#include "sp_reshard.h"
#include "sp_diag.h"
#include "sp_mlir.h"
#include "sp_input.h"

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

/* ---- element access ---------------------------------------------------------- */

static bool elem_supported(sp_elem e)
{
    switch (e) {
    case SP_ELEM_F32:
    case SP_ELEM_F64:
    case SP_ELEM_I1:
    case SP_ELEM_I8:
    case SP_ELEM_I16:
    case SP_ELEM_I32:
    case SP_ELEM_I64:
    case SP_ELEM_UI8:
    case SP_ELEM_UI16:
    case SP_ELEM_UI32:
    case SP_ELEM_UI64:
        return true;
    default:
        return false;
    }
}

static bool elem_float(sp_elem e)
{
    return e == SP_ELEM_F32 || e == SP_ELEM_F64;
}

static double ld(const void *p, sp_elem e, size_t i)
{
    switch (e) {
    case SP_ELEM_F32:
        return (double)((const float *)p)[i];
    case SP_ELEM_F64:
        return ((const double *)p)[i];
    case SP_ELEM_I1:
    case SP_ELEM_UI8:
        return (double)((const uint8_t *)p)[i];
    case SP_ELEM_I8:
        return (double)((const int8_t *)p)[i];
    case SP_ELEM_I16:
        return (double)((const int16_t *)p)[i];
    case SP_ELEM_UI16:
        return (double)((const uint16_t *)p)[i];
    case SP_ELEM_I32:
        return (double)((const int32_t *)p)[i];
    case SP_ELEM_UI32:
        return (double)((const uint32_t *)p)[i];
    case SP_ELEM_I64:
        return (double)((const int64_t *)p)[i];
    case SP_ELEM_UI64:
        return (double)((const uint64_t *)p)[i];
    default:
        return 0;
    }
}

static void st(void *p, sp_elem e, size_t i, double v)
{
    switch (e) {
    case SP_ELEM_F32:
        ((float *)p)[i] = (float)v;
        break;
    case SP_ELEM_F64:
        ((double *)p)[i] = v;
        break;
    case SP_ELEM_I1:
        ((uint8_t *)p)[i] = v != 0;
        break;
    case SP_ELEM_UI8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case SP_ELEM_I8:
        ((int8_t *)p)[i] = (int8_t)v;
        break;
    case SP_ELEM_I16:
        ((int16_t *)p)[i] = (int16_t)v;
        break;
    case SP_ELEM_UI16:
        ((uint16_t *)p)[i] = (uint16_t)v;
        break;
    case SP_ELEM_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case SP_ELEM_UI32:
        ((uint32_t *)p)[i] = (uint32_t)v;
        break;
    case SP_ELEM_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case SP_ELEM_UI64:
        ((uint64_t *)p)[i] = (uint64_t)v;
        break;
    default:
        break;
    }
}

static size_t count_of(const int64_t *dims, uint32_t rank)
{
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++) {
        n *= (size_t)dims[i];
    }
    return n;
}

/* Advances a row-major coordinate; false after the last one. */
static bool next_coord(int64_t *c, const int64_t *dims, uint32_t rank)
{
    for (uint32_t k = rank; k-- > 0;) {
        if (++c[k] < dims[k]) {
            return true;
        }
        c[k] = 0;
    }
    return false;
}

void ex_tensors_free(ex_tensor *t, uint32_t n)
{
    if (t == NULL) {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        cm_free(t[i].data);
    }
    cm_free(t);
}

/* ---- the prepared program --------------------------------------------------- */

typedef struct vinfo {
    bool live;             /* a value of a block the workers run */
    bool is_arg;           /* main's argument (the run's input shards) */
    bool is_result;        /* returned by main: never freed by workers */
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
} vinfo;

enum { RED_ADD, RED_MAX, RED_MIN, RED_MUL, RED_AND, RED_OR };
enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE };

typedef struct xop {
    uint32_t op;
    sp_op_kind kind;
    const int64_t *a, *b, *c, *d; /* decoded integer attributes */
    uint32_t na, nb, nc, nd;
    int64_t dim;                  /* iota / concatenate dimension */
    int fn;                       /* reduce body or comparison */
    int64_t *grp_of;              /* collectives: n_dev entries, row of each device */
    int64_t *groups;              /* n_groups * gsize device ids */
    uint32_t gsize;
    double *cval;                 /* constant values (1: splat) */
    void *ext;                    /* ex_gather_dims / ex_conv_dims (gather, scatter, conv) */
    size_t n_cval;
    bool local;                   /* a reshard, constraint or permute that leaves every
                                     device's block where it is: a local copy, no barrier */
    uint32_t *dead;               /* values whose buffers are released after this op */
    uint32_t n_dead;
    uint32_t *sub;                /* while: cond, body; case/if: branches; call: the callee's
                                     body (block ids) */
    uint32_t n_sub;
} xop;

#define EX_MAX_NEST 64 /* regions and calls nested deeper than this are rejected */

/* A block the workers run: main's body, a called function's body, a while's
 * condition or body, a case/if branch, a manual computation's body. Its last
 * op is the terminator, which the parent op handles (flow_*). */
typedef struct pblock {
    xop *ops;
    uint32_t n_ops;
    uint32_t height; /* levels of blocks run inside it */
    bool busy;       /* being prepared: a call to its function is a recursion */
    bool done;
    bool manual;     /* prepared inside an sdy.manual_computation body */
} pblock;

typedef struct prog {
    const sp_module *m;
    uint32_t block;   /* main's body */
    uint32_t n_dev;
    bool replicated;
    vinfo *vi;        /* by value id */
    pblock *pbs;      /* by block id; prepared when ops != NULL */
    uint32_t ret;     /* op id of main's return */
    ex_gate *gate;    /* held by a worker while it computes (run_local); NULL: none */
    ex_par **par;     /* by device: its pool for element-wise loops, or NULL (ex_par) */
    uint32_t n_gates; /* gate[dev % n_gates] is dev's (one per CPU with affinity) */
    cm_arena arena;
    /* preparation: the ops enclosing the one being prepared, innermost last,
     * as (block, index); a function's body starts a new scope at nest_base */
    uint32_t nest_blk[EX_MAX_NEST + 1], nest_idx[EX_MAX_NEST + 1];
    uint32_t n_nest, nest_base;
    bool in_manual; /* preparing an sdy.manual_computation body: values held whole */
} prog;

static cm_status op_error(const prog *p, uint32_t op, cm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reports an error located at op ("LINE:COL" when the op came from text). */
static cm_status op_error(const prog *p, uint32_t op, cm_error *err, const char *fmt, ...)
{
    char path[32];
    path[0] = '\0';
    const sp_op *o = &p->m->ops[op];
    if (o->line > 0) {
        snprintf(path, sizeof path, "%u:%u", o->line, o->col);
    }
    va_list ap;
    va_start(ap, fmt);
    cm_status st_ = cm_error_setv(err, CM_EINVAL, path, fmt, ap);
    va_end(ap);
    return st_;
}

static const sp_mesh *sharding_mesh(const sp_module *m, const sp_sharding *s)
{
    return s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : s->mesh;
}

/* The sharding a value is held with: collectives carry out_sharding, reshards
 * `sharding`, a while's condition and body arguments are sharded as its
 * results; everything else as sp_value_sharding. NULL: replicated. */
static const sp_sharding *held_sharding(const sp_module *m, uint32_t v)
{
    return sp_value_sharding_partitioned(m, v);
}

/* Mesh position of device dev (through the mesh's device_ids), or -1. */
static int64_t mesh_position(const sp_mesh *mesh, int64_t dev)
{
    if (mesh->device_ids == NULL || mesh->n_device_ids == 0) {
        return dev;
    }
    for (uint32_t i = 0; i < mesh->n_device_ids; i++) {
        if (mesh->device_ids[i] == dev) {
            return (int64_t)i;
        }
    }
    return -1;
}

/* Fills the value's local dims and per-device offsets. */
static cm_status value_prepare(prog *p, uint32_t v, uint32_t op_for_err, cm_error *err)
{
    const sp_module *m = p->m;
    vinfo *vi = &p->vi[v];
    const sp_type *t = sp_value_type(m, v);
    if (t->kind != SP_TYPE_TENSOR || !elem_supported(t->elem) || t->rank > EX_MAX_RANK) {
        return op_error(p, op_for_err, err, "type %s cannot be executed yet", t->text);
    }
    for (uint32_t k = 0; k < t->rank; k++) {
        if (t->dims[k] < 0) {
            return op_error(p, op_for_err, err, "dynamic type %s cannot be executed yet",
                            t->text);
        }
    }
    vi->live = true;
    vi->last_use = UINT32_MAX;
    vi->elem = t->elem;
    vi->rank = t->rank;
    vi->esz = sp_elem_bytes(t->elem);
    vi->gdims = t->dims;
    vi->ldims = cm_arena_alloc(&p->arena, sizeof(int64_t) * (t->rank + 1u));
    vi->off = cm_arena_zalloc(&p->arena, sizeof(int64_t) * (t->rank * p->n_dev + 1u));
    if (vi->ldims == NULL || vi->off == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    size_t bytes = sp_elem_bytes(t->elem);
    for (uint32_t k = 0; k < t->rank; k++) {
        if (!cm_mul_size(bytes, (size_t)t->dims[k], &bytes) || bytes > (SIZE_MAX >> 2)) {
            return op_error(p, op_for_err, err, "type %s is too large", t->text);
        }
    }
    memcpy(vi->ldims, t->dims, sizeof(int64_t) * t->rank);
    /* inside a manual computation's body every device holds its manual
     * group's whole (local) tensors: the partitioner leaves bodies alone */
    const sp_sharding *s = p->replicated || p->in_manual ? NULL : held_sharding(m, v);
    if (s != NULL && s->rank == t->rank) {
        const sp_mesh *mesh = sharding_mesh(m, s);
        if (mesh == NULL) {
            return op_error(p, op_for_err, err, "sharding on unknown mesh %s",
                            s->mesh_name != NULL ? s->mesh_name : "?");
        }
        if (sp_mesh_size(mesh) != (int64_t)p->n_dev) {
            return op_error(p, op_for_err, err,
                            "a value on a mesh whose size is not the device count (%s) cannot "
                            "be executed yet",
                            s->mesh_name != NULL ? s->mesh_name : "inlined mesh");
        }
        cm_error e2;
        cm_error_clear(&e2);
        if (sp_local_shape(s, mesh, t->dims, t->rank, vi->ldims, &e2) != CM_OK) {
            return op_error(p, op_for_err, err, "bad sharding: %s", e2.msg);
        }
        for (uint32_t d = 0; d < p->n_dev; d++) {
            int64_t pos = mesh_position(mesh, d);
            if (pos < 0) {
                return op_error(p, op_for_err, err, "device missing from mesh %s",
                                s->mesh_name != NULL ? s->mesh_name : "?");
            }
            int64_t coord[SP_MAX_RANK];
            for (uint32_t a = mesh->n_axes; a-- > 0;) {
                coord[a] = pos % mesh->axes[a].size;
                pos /= mesh->axes[a].size;
            }
            for (uint32_t k = 0; k < t->rank; k++) {
                int64_t idx = 0;
                for (uint32_t j = 0; j < s->dims[k].n_axes; j++) {
                    const sp_axis_ref *r = &s->dims[k].axes[j];
                    int32_t ai = sp_mesh_axis_index(mesh, r->name);
                    if (ai < 0) {
                        return op_error(p, op_for_err, err, "unknown mesh axis %s", r->name);
                    }
                    int64_t c = coord[ai], size = mesh->axes[ai].size;
                    if (r->pre_size > 0) {
                        /* Shardy's pre-size is the product of the sub-axes
                         * major to this one (sp_collective_groups agrees) */
                        c = (c / (size / (r->pre_size * r->size))) % r->size;
                        size = r->size;
                    }
                    idx = idx * size + c;
                }
                vi->off[d * t->rank + k] = idx * vi->ldims[k];
            }
        }
    }
    vi->lcount = count_of(vi->ldims, t->rank);
    return CM_OK;
}

static const int64_t *voff(const prog *p, uint32_t v, uint32_t dev)
{
    return &p->vi[v].off[dev * p->vi[v].rank];
}

/* True when every device's block of v and of r is the same region of the
 * same shape: a reshard from v to r moves nothing between devices. */
static bool same_blocks(const prog *p, uint32_t v, uint32_t r)
{
    const vinfo *a = &p->vi[v], *b = &p->vi[r];
    if (p->replicated || a->rank != b->rank || a->elem != b->elem) {
        return false;
    }
    for (uint32_t k = 0; k < a->rank; k++) {
        if (a->ldims[k] != b->ldims[k]) {
            return false;
        }
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        if (memcmp(voff(p, v, d), voff(p, r, d), sizeof(int64_t) * a->rank) != 0) {
            return false;
        }
    }
    return true;
}

/* Valid extent of the block at off (the last shard of a non-divisible
 * dimension is padded). */
static int64_t valid_len(const vinfo *vi, uint32_t k, int64_t off)
{
    int64_t n = vi->gdims[k] - off;
    return n < 0 ? 0 : (n < vi->ldims[k] ? n : vi->ldims[k]);
}

static bool ints_attr(prog *p, uint32_t op, const char *name, const int64_t **v, uint32_t *n)
{
    return sp_attr_ints(sp_op_attr(p->m, op, name), v, n, &p->arena);
}

static const sp_attr *params_item(const sp_attr *a, const char *name)
{
    if (a == NULL || a->kind != SP_ATTR_PARAMS) {
        return NULL;
    }
    return sp_attrs_get(a->u.params.items, a->u.params.n, name);
}

/* Parses a dense<...> body: a splat, a nested list, true/false or a hex splat. */
static cm_status parse_constant(prog *p, xop *x, const sp_attr *a, sp_elem e, size_t count,
                                cm_error *err)
{
    if (a == NULL || a->kind != SP_ATTR_DENSE || a->u.dense.body == NULL) {
        return op_error(p, x->op, err, "%s: constant without a dense value cannot be executed yet",
                        p->m->ops[x->op].name);
    }
    const char *s = a->u.dense.body;
    x->cval = cm_arena_alloc(&p->arena, sizeof(double) * (count + 1u));
    if (x->cval == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    while (*s == ' ' || *s == '"') {
        s++;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        unsigned long long bits = strtoull(s + 2, NULL, 16);
        if (strlen(s) > 2 + 16 + 1) {
            return op_error(p, x->op, err, "%s: hex constant lists cannot be executed yet",
                            p->m->ops[x->op].name);
        }
        if (e == SP_ELEM_F32) {
            uint32_t b32 = (uint32_t)bits;
            float f;
            memcpy(&f, &b32, sizeof f);
            x->cval[0] = (double)f;
        } else if (e == SP_ELEM_F64) {
            uint64_t b64 = (uint64_t)bits;
            double d;
            memcpy(&d, &b64, sizeof d);
            x->cval[0] = d;
        } else {
            x->cval[0] = (double)bits;
        }
        x->n_cval = 1;
        return CM_OK;
    }
    size_t n = 0;
    while (*s != '\0') {
        if (*s == '[' || *s == ']' || *s == ',' || *s == ' ' || *s == '\n' || *s == '"') {
            s++;
            continue;
        }
        double v;
        char *end = NULL;
        if (strncmp(s, "true", 4) == 0) {
            v = 1;
            end = (char *)(uintptr_t)(s + 4);
        } else if (strncmp(s, "false", 5) == 0) {
            v = 0;
            end = (char *)(uintptr_t)(s + 5);
        } else {
            v = strtod(s, &end);
            if (end == s) {
                return op_error(p, x->op, err, "%s: constant literal cannot be executed yet",
                                p->m->ops[x->op].name);
            }
        }
        if (n >= count) {
            return op_error(p, x->op, err, "%s: constant has too many elements",
                            p->m->ops[x->op].name);
        }
        x->cval[n++] = v;
        s = end;
    }
    if (n != 1 && n != count) {
        return op_error(p, x->op, err, "%s: constant element count does not match its type",
                        p->m->ops[x->op].name);
    }
    x->n_cval = n;
    return CM_OK;
}

/* Collects the axes of a collective and computes its device groups. */
static cm_status prepare_groups(prog *p, xop *x, const char *key, cm_error *err)
{
    const sp_module *m = p->m;
    sp_axis_ref refs[4 * SP_MAX_RANK];
    uint32_t n = 0;
    const sp_attr *axes = key != NULL ? sp_op_attr(m, x->op, key) : NULL;
    if (axes != NULL && axes->kind == SP_ATTR_AXIS_LIST) {
        for (uint32_t j = 0; j < axes->u.axes.n && n < 4 * SP_MAX_RANK; j++) {
            refs[n++] = axes->u.axes.axes[j];
        }
    } else if (axes != NULL && axes->kind == SP_ATTR_AXIS_LISTS) {
        for (uint32_t i = 0; i < axes->u.axis_lists.n; i++) {
            const sp_axis_list *l = &axes->u.axis_lists.items[i];
            for (uint32_t j = 0; j < l->n && n < 4 * SP_MAX_RANK; j++) {
                refs[n++] = l->axes[j];
            }
        }
    } else if (axes != NULL && axes->kind == SP_ATTR_ALL_TO_ALL) {
        for (uint32_t i = 0; i < axes->u.a2a.n; i++) {
            const sp_axis_list *l = &axes->u.a2a.items[i].axes;
            for (uint32_t j = 0; j < l->n && n < 4 * SP_MAX_RANK; j++) {
                refs[n++] = l->axes[j];
            }
        }
    }
    x->grp_of = cm_arena_alloc(&p->arena, sizeof(int64_t) * p->n_dev);
    if (x->grp_of == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    const sp_sharding *s = held_sharding(m, m->ops[x->op].first_result);
    const sp_mesh *mesh = s != NULL ? sharding_mesh(m, s) : NULL;
    if (key == NULL || mesh == NULL) {
        /* Reshards and permutes: any device may hold what another needs. */
        x->groups = cm_arena_alloc(&p->arena, sizeof(int64_t) * p->n_dev);
        if (x->groups == NULL) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        }
        for (uint32_t d = 0; d < p->n_dev; d++) {
            x->groups[d] = d;
            x->grp_of[d] = 0;
        }
        x->gsize = p->n_dev;
        return CM_OK;
    }
    uint32_t ng = 0, gs = 0;
    cm_error e2;
    cm_error_clear(&e2);
    if (sp_collective_groups(mesh, refs, n, &x->groups, &ng, &gs, &p->arena, &e2) != CM_OK) {
        return op_error(p, x->op, err, "device groups: %s", e2.msg);
    }
    x->gsize = gs;
    for (uint32_t d = 0; d < p->n_dev; d++) {
        x->grp_of[d] = -1;
    }
    for (uint32_t g = 0; g < ng; g++) {
        for (uint32_t j = 0; j < gs; j++) {
            int64_t dev = x->groups[(size_t)g * gs + j];
            if (dev < 0 || dev >= (int64_t)p->n_dev) {
                return op_error(p, x->op, err, "%s: device id out of range",
                                m->ops[x->op].name);
            }
            x->grp_of[dev] = g;
        }
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        if (x->grp_of[d] < 0) {
            return op_error(p, x->op, err, "%s: a device is in no group", m->ops[x->op].name);
        }
    }
    return CM_OK;
}

/* The one block of op's one region, or NULL. */
static const sp_block *body_block(const sp_module *m, uint32_t op)
{
    const sp_op *o = &m->ops[op];
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        return NULL;
    }
    return &m->blocks[o->regions[0].blocks[0]];
}

/* The reduction of a body block of two ops (a binary op and the return), or -1. */
static int block_reduce_fn(const sp_module *m, const sp_block *b)
{
    if (b == NULL || b->n_ops != 2) {
        return -1;
    }
    switch ((sp_op_kind)m->ops[b->ops[0]].kind) {
    case SP_OP_ADD:
        return RED_ADD;
    case SP_OP_MAXIMUM:
        return RED_MAX;
    case SP_OP_MINIMUM:
        return RED_MIN;
    case SP_OP_MULTIPLY:
        return RED_MUL;
    case SP_OP_AND:
        return RED_AND;
    case SP_OP_OR:
        return RED_OR;
    default:
        return -1;
    }
}

static int reduce_body(const sp_module *m, uint32_t op)
{
    return block_reduce_fn(m, body_block(m, op));
}

/* The comparison direction of a compare op (CMP_*, -1: none); *total is set
 * when its compare_type is TOTALORDER. */
static int compare_dir(const sp_module *m, uint32_t op, bool *total)
{
    static const char *const names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    const sp_attr *a = sp_op_attr(m, op, "comparison_direction");
    const sp_attr *t = sp_op_attr(m, op, "compare_type");
    const char *v = a != NULL && a->kind == SP_ATTR_ENUM ? a->u.enm.value : "";
    *total = t != NULL && t->kind == SP_ATTR_ENUM && strcmp(t->u.enm.value, "TOTALORDER") == 0;
    for (int i = 0; i < 6; i++) {
        if (strcmp(v, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

/* ---- ops with a kernel in ex_kern.c: attributes ------------------------------------ */

/* The integer list item `name` of a PARAMS attribute (absent: empty). */
static bool params_ints(prog *p, const sp_attr *a, const char *name, const int64_t **v, uint32_t *n)
{
    const sp_attr *it = params_item(a, name);
    *v = NULL;
    *n = 0;
    return it == NULL || sp_attr_ints(it, v, n, &p->arena);
}

static bool dims_below(const int64_t *v, uint32_t n, uint32_t rank)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= (int64_t)rank) {
            return false;
        }
    }
    return true;
}

/* A dot operand's batching and contracting dims: in range, none twice. */
static bool dot_dims_ok(const sp_module *m, uint32_t v, const int64_t *b, uint32_t nb,
                        const int64_t *c, uint32_t nc)
{
    uint32_t rank = sp_value_type(m, v)->rank;
    bool seen[EX_MAX_RANK] = {false};
    if (!dims_below(b, nb, rank) || !dims_below(c, nc, rank) || rank > EX_MAX_RANK) {
        return false;
    }
    for (uint32_t i = 0; i < nb + nc; i++) {
        int64_t d = i < nb ? b[i] : c[i - nb];
        if (seen[d]) {
            return false;
        }
        seen[d] = true;
    }
    return true;
}

static bool is_int_elem(sp_elem e)
{
    return elem_supported(e) && !elem_float(e) && e != SP_ELEM_I1;
}

/* gather / scatter dimension numbers: names[0..5] are the items for
 * offset (update window) dims, collapsed (inserted) dims, operand (input)
 * batching dims, indices batching dims, start index map and index vector
 * dim; opv the operand, ixv the indices, wv the value holding the window
 * dims (gather: the result, scatter: the updates). */
static cm_status prepare_gather_dims(prog *p, xop *x, const char *attr, const char *const *names,
                                     uint32_t opv, uint32_t ixv, uint32_t wv, cm_error *err)
{
    const sp_module *m = p->m;
    const char *nm = m->ops[x->op].name;
    const sp_attr *a = sp_op_attr(m, x->op, attr);
    ex_gather_dims *g = cm_arena_zalloc(&p->arena, sizeof *g);
    if (g == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    const sp_attr *ivd = params_item(a, names[5]);
    uint32_t orank = sp_value_type(m, opv)->rank, irank = sp_value_type(m, ixv)->rank,
             wrank = sp_value_type(m, wv)->rank;
    bool ok = a != NULL && a->kind == SP_ATTR_PARAMS && ivd != NULL && ivd->kind == SP_ATTR_INT &&
              params_ints(p, a, names[0], &g->offset_dims, &g->n_offset) &&
              params_ints(p, a, names[1], &g->collapsed, &g->n_collapsed) &&
              params_ints(p, a, names[2], &g->obatch, &g->n_obatch) &&
              params_ints(p, a, names[3], &g->ibatch, &g->n_ibatch) &&
              params_ints(p, a, names[4], &g->start_map, &g->n_start_map);
    if (!ok) {
        return op_error(p, x->op, err, "op %s: attributes the executor cannot read", nm);
    }
    g->ivd = ivd->u.i.v;
    uint32_t nw = 0;
    for (uint32_t d = 0; d < orank; d++) {
        bool c = false;
        for (uint32_t i = 0; i < g->n_collapsed; i++) {
            c = c || g->collapsed[i] == (int64_t)d;
        }
        for (uint32_t i = 0; i < g->n_obatch; i++) {
            c = c || g->obatch[i] == (int64_t)d;
        }
        nw += c ? 0u : 1u;
    }
    const sp_type *it = sp_value_type(m, ixv);
    bool has_ivd = g->ivd < (int64_t)irank;
    int64_t vec = has_ivd && g->ivd >= 0 ? it->dims[g->ivd] : 1;
    for (uint32_t i = 0; i < g->n_ibatch; i++) {
        ok = ok && g->ibatch[i] != g->ivd;
    }
    ok = ok && g->ivd >= 0 && g->ivd <= (int64_t)irank &&
         dims_below(g->offset_dims, g->n_offset, wrank) &&
         dims_below(g->collapsed, g->n_collapsed, orank) &&
         dims_below(g->obatch, g->n_obatch, orank) && dims_below(g->ibatch, g->n_ibatch, irank) &&
         dims_below(g->start_map, g->n_start_map, orank) && g->n_obatch == g->n_ibatch &&
         nw == g->n_offset && wrank - g->n_offset == irank - (has_ivd ? 1u : 0u) &&
         (int64_t)g->n_start_map == vec && is_int_elem(it->elem) &&
         sp_value_type(m, wv)->elem == sp_value_type(m, opv)->elem &&
         sp_value_type(m, m->ops[x->op].first_result)->elem == sp_value_type(m, opv)->elem;
    if (!ok) {
        return op_error(p, x->op, err, "op %s: dimension numbers do not fit the operand shapes",
                        nm);
    }
    x->ext = g;
    return CM_OK;
}

static cm_status prepare_gather(prog *p, xop *x, cm_error *err)
{
    static const char *const names[6] = {"offset_dims",           "collapsed_slice_dims",
                                         "operand_batching_dims", "start_indices_batching_dims",
                                         "start_index_map",       "index_vector_dim"};
    const sp_op *o = &p->m->ops[x->op];
    if (o->n_operands != 2 || o->n_results != 1) {
        return op_error(p, x->op, err, "op %s with these operands cannot be executed yet", o->name);
    }
    cm_status st_ = prepare_gather_dims(p, x, "dimension_numbers", names, o->operands[0],
                                        o->operands[1], o->first_result, err);
    if (st_ != CM_OK) {
        return st_;
    }
    ex_gather_dims *g = x->ext;
    uint32_t n = 0;
    const int64_t *ss = NULL;
    const sp_type *ot = sp_value_type(p->m, o->operands[0]);
    bool ok = ints_attr(p, x->op, "slice_sizes", &ss, &n) && n == ot->rank;
    for (uint32_t d = 0; ok && d < n; d++) {
        ok = ss[d] >= 0 && ss[d] <= ot->dims[d];
    }
    if (!ok) {
        return op_error(p, x->op, err, "op %s: slice_sizes do not fit the operand", o->name);
    }
    g->slice_sizes = ss;
    return CM_OK;
}

/* The combiner of a scatter's body: -1 replace (returns the update), else
 * EX_RED_*; -2 for anything else. */
static int scatter_body(const sp_module *m, uint32_t op)
{
    const sp_block *b = body_block(m, op);
    if (b == NULL) {
        return -2;
    }
    if (b->n_ops == 1 && b->n_args == 2) {
        const sp_op *ret = &m->ops[b->ops[0]];
        return ret->n_operands == 1 && ret->operands[0] == b->first_arg + 1 ? -1 : -2;
    }
    int fn = reduce_body(m, op);
    return fn == RED_ADD || fn == RED_MUL || fn == RED_MAX || fn == RED_MIN ? fn : -2;
}

static cm_status prepare_scatter(prog *p, xop *x, cm_error *err)
{
    static const char *const names[6] = {
        "update_window_dims",           "inserted_window_dims",
        "input_batching_dims",          "scatter_indices_batching_dims",
        "scatter_dims_to_operand_dims", "index_vector_dim"};
    const sp_op *o = &p->m->ops[x->op];
    if (o->n_operands != 3 || o->n_results != 1) {
        return op_error(p, x->op, err, "op %s with several inputs cannot be executed yet", o->name);
    }
    x->fn = scatter_body(p->m, x->op);
    if (x->fn < -1) {
        return op_error(p, x->op, err, "%s with this body cannot be executed yet", o->name);
    }
    return prepare_gather_dims(p, x, "scatter_dimension_numbers", names, o->operands[0],
                               o->operands[1], o->operands[2], err);
}

/* The extent of n elements d apart, (n - 1) * d + 1 (0 for none); -1 past
 * 2^60. */
static int64_t dilated(int64_t n, int64_t d)
{
    int64_t r;
    if (n <= 0) {
        return 0;
    }
    if (!cm_mul_i64(n - 1, d, &r) || r > ((int64_t)1 << 60)) {
        return -1;
    }
    return r + 1;
}

static cm_status prepare_conv(prog *p, xop *x, cm_error *err)
{
    static const char *const names[9] = {
        "input_batch_dimension",           "input_feature_dimension",
        "input_spatial_dimensions",        "kernel_input_feature_dimension",
        "kernel_output_feature_dimension", "kernel_spatial_dimensions",
        "output_batch_dimension",          "output_feature_dimension",
        "output_spatial_dimensions"};
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    ex_conv_dims *cd = cm_arena_zalloc(&p->arena, sizeof *cd);
    if (cd == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    if (o->n_operands != 2 || o->n_results != 1) {
        return op_error(p, x->op, err, "op %s with these operands cannot be executed yet", nm);
    }
    const sp_type *it = sp_value_type(m, o->operands[0]), *kt = sp_value_type(m, o->operands[1]),
                  *ot = sp_value_type(m, o->first_result);
    uint32_t rank = it->rank;
    const sp_attr *dn = sp_op_attr(m, x->op, "dimension_numbers");
    const int64_t *v[9];
    uint32_t n[9];
    bool ok = dn != NULL && dn->kind == SP_ATTR_PARAMS && kt->rank == rank && ot->rank == rank &&
              rank >= 2 && rank <= EX_KERN_MAX_RANK;
    for (int i = 0; ok && i < 9; i++) {
        ok = params_ints(p, dn, names[i], &v[i], &n[i]) && n[i] == (i % 3 == 2 ? rank - 2 : 1) &&
             dims_below(v[i], n[i], rank);
    }
    if (!ok) {
        return op_error(p, x->op, err, "op %s: attributes the executor cannot read", nm);
    }
    cd->ns = rank - 2;
    cd->ib = v[0][0];
    cd->ifeat = v[1][0];
    cd->ki = v[3][0];
    cd->ko = v[4][0];
    cd->ob = v[6][0];
    cd->ofeat = v[7][0];
    for (uint32_t j = 0; j < cd->ns; j++) {
        cd->is[j] = v[2][j];
        cd->ks[j] = v[5][j];
        cd->os[j] = v[8][j];
        cd->stride[j] = 1;
        cd->rdil[j] = 1;
    }
    const int64_t *a;
    uint32_t na;
    const int64_t big = (int64_t)1 << 60; /* window parameters beyond this are refused */
    if (ints_attr(p, x->op, "window_strides", &a, &na)) {
        ok = ok && na == cd->ns;
        for (uint32_t j = 0; ok && j < na; j++) {
            ok = a[j] >= 1 && a[j] <= big;
            cd->stride[j] = a[j];
        }
    }
    static const char *const dil[2] = {"lhs_dilation", "rhs_dilation"};
    for (int i = 0; i < 2; i++) {
        int64_t *to = i == 0 ? cd->ldil : cd->rdil;
        for (uint32_t j = 0; j < cd->ns; j++) {
            to[j] = 1;
        }
        if (ints_attr(p, x->op, dil[i], &a, &na)) {
            ok = ok && na == cd->ns;
            for (uint32_t j = 0; ok && j < na; j++) {
                ok = a[j] >= 1 && a[j] <= big;
                to[j] = a[j];
            }
        }
    }
    int64_t pad_hi[EX_KERN_MAX_RANK] = {0};
    if (ints_attr(p, x->op, "padding", &a, &na)) {
        ok = ok && na == 2 * cd->ns;
        for (uint32_t j = 0; ok && j < cd->ns; j++) {
            cd->pad_lo[j] = a[2 * j];
            pad_hi[j] = a[2 * j + 1];
            ok = a[2 * j] >= -big && a[2 * j] <= big && a[2 * j + 1] >= -big && a[2 * j + 1] <= big;
        }
    }
    if (ints_attr(p, x->op, "window_reversal", &a, &na)) {
        ok = ok && na == cd->ns;
        for (uint32_t j = 0; ok && j < na; j++) {
            cd->rev[j] = a[j] != 0;
        }
    }
    static const char *const gname[2] = {"feature_group_count", "batch_group_count"};
    for (int i = 0; i < 2; i++) {
        const sp_attr *g = sp_op_attr(m, x->op, gname[i]);
        int64_t *to = i == 0 ? &cd->fgc : &cd->bgc;
        *to = 1;
        if (g != NULL) {
            ok = ok && g->kind == SP_ATTR_INT && g->u.i.v >= 1;
            *to = ok ? g->u.i.v : 1;
        }
    }
    if (!ok) {
        return op_error(p, x->op, err, "op %s: window attributes the executor cannot read", nm);
    }
    /* the output shape must follow from the window and the groups (so no read
     * goes astray) */
    int64_t in_f = it->dims[cd->ifeat], in_b = it->dims[cd->ib], kout = kt->dims[cd->ko], kin;
    ok = (cd->fgc == 1 || cd->bgc == 1) && cm_mul_i64(kt->dims[cd->ki], cd->fgc, &kin) &&
         in_f == kin && kout % cd->fgc == 0 && kout % cd->bgc == 0 && in_b % cd->bgc == 0 &&
         ot->dims[cd->ofeat] == kout && ot->dims[cd->ob] == in_b / cd->bgc;
    for (uint32_t j = 0; ok && j < cd->ns; j++) {
        int64_t in = dilated(it->dims[cd->is[j]], cd->ldil[j]);
        int64_t span = dilated(kt->dims[cd->ks[j]], cd->rdil[j]);
        int64_t w = in + cd->pad_lo[j] + pad_hi[j] - span;
        ok = in >= 0 && span >= 0 && ot->dims[cd->os[j]] == (w < 0 ? 0 : w / cd->stride[j] + 1);
    }
    if (!ok || it->elem != ot->elem || kt->elem != ot->elem ||
        (ot->elem != SP_ELEM_F32 && ot->elem != SP_ELEM_F64)) {
        return op_error(p, x->op, err, "op %s: shapes or types the executor cannot run", nm);
    }
    x->ext = cd;
    return CM_OK;
}

/* window_dimensions, window_strides and padding of a windowed op of the given
 * rank into x->a, x->b (default 1) and x->c (lo, hi per dim; absent: x->nc
 * 0); *ok false when they are unreadable or not positive. CM_ENOMEM only. */
static cm_status window_attrs(prog *p, xop *x, uint32_t rank, bool *ok, cm_error *err)
{
    const sp_module *m = p->m;
    int64_t *ones = cm_arena_alloc(&p->arena, sizeof(int64_t) * (2u * rank + 1u));
    if (ones == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    for (uint32_t k = 0; k < 2 * rank; k++) {
        ones[k] = k < rank ? 1 : 0;
    }
    x->b = ones;
    x->nb = rank;
    x->c = ones + rank;
    x->nc = 0;
    *ok = ints_attr(p, x->op, "window_dimensions", &x->a, &x->na) && x->na == rank;
    if (*ok && sp_op_attr(m, x->op, "window_strides") != NULL) {
        *ok = ints_attr(p, x->op, "window_strides", &x->b, &x->nb) && x->nb == rank;
    }
    if (*ok && sp_op_attr(m, x->op, "padding") != NULL) {
        *ok = ints_attr(p, x->op, "padding", &x->c, &x->nc) && x->nc == 2 * rank;
    }
    const int64_t big = (int64_t)1 << 60; /* beyond this the window arithmetic could overflow */
    size_t nwin = 1; /* elements of one window: at most 2^32 */
    for (uint32_t k = 0; *ok && k < rank; k++) {
        *ok = x->a[k] >= 1 && x->a[k] <= big && x->b[k] >= 1 && x->b[k] <= big &&
              cm_mul_size(nwin, (size_t)x->a[k], &nwin) && nwin <= ((size_t)1 << 32);
    }
    for (uint32_t k = 0; *ok && k < x->nc; k++) {
        *ok = x->c[k] >= -big && x->c[k] <= big;
    }
    return CM_OK;
}

/* Whether w (the windowed result, or select_and_scatter's source) has one
 * element per window of the decoded window over t. */
static bool window_count_ok(const xop *x, const sp_type *t, const sp_type *w)
{
    if (w->rank != t->rank) {
        return false;
    }
    for (uint32_t k = 0; k < t->rank; k++) {
        int64_t lo = x->nc ? x->c[2 * k] : 0, hi = x->nc ? x->c[2 * k + 1] : 0;
        if (t->dims[k] > ((int64_t)1 << 60)) {
            return false;
        }
        int64_t span = t->dims[k] + lo + hi - x->a[k];
        if (w->dims[k] != (span < 0 ? 0 : span / x->b[k] + 1)) {
            return false;
        }
    }
    return true;
}

/* reduce_window: window dims in x->a, strides in x->b, padding (lo, hi per
 * dim) in x->c; no dilations. */
static cm_status prepare_reduce_window(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    if (o->n_operands != 2 || o->n_results != 1) {
        return op_error(p, x->op, err, "%s with several inputs cannot be executed yet", o->name);
    }
    x->fn = reduce_body(m, x->op);
    if (x->fn < 0) {
        return op_error(p, x->op, err, "%s with this body cannot be executed yet", o->name);
    }
    const sp_type *t = sp_value_type(m, o->operands[0]), *rt = sp_value_type(m, o->first_result);
    uint32_t rank = t->rank, n = 0;
    bool ok;
    cm_status st_ = window_attrs(p, x, rank, &ok, err);
    if (st_ != CM_OK) {
        return st_;
    }
    ok = ok && rt->elem == t->elem && sp_value_type(m, o->operands[1])->elem == t->elem;
    static const char *const dil[2] = {"base_dilations", "window_dilations"};
    for (int i = 0; ok && i < 2; i++) {
        const int64_t *d;
        if (ints_attr(p, x->op, dil[i], &d, &n)) {
            for (uint32_t k = 0; k < n; k++) {
                if (d[k] != 1) {
                    return op_error(p, x->op, err, "%s with dilations cannot be executed yet",
                                    o->name);
                }
            }
        }
    }
    if (!ok || !window_count_ok(x, t, rt)) {
        return op_error(p, x->op, err, "op %s: attributes the executor cannot read", o->name);
    }
    return CM_OK;
}

/* The block of region ri of op when that region has exactly one, or NULL. */
static const sp_block *region_block(const sp_module *m, uint32_t op, uint32_t ri)
{
    const sp_op *o = &m->ops[op];
    if (ri >= o->n_regions || o->regions[ri].n_blocks != 1) {
        return NULL;
    }
    return &m->blocks[o->regions[ri].blocks[0]];
}

/* The op defining v in block bi, or SP_NONE (an argument, or a value from
 * outside the block). */
static uint32_t def_in(const sp_module *m, uint32_t bi, uint32_t v)
{
    uint32_t d = m->values[v].def;
    return d != SP_NONE && m->ops[d].parent_block == bi ? d : SP_NONE;
}

/* Argument number of v when it is an argument of block bi, else -1. */
static int64_t arg_of(const sp_module *m, uint32_t bi, uint32_t v)
{
    const sp_value *val = &m->values[v];
    return val->def == SP_NONE && val->block == bi ? (int64_t)val->index : -1;
}

/* Whether op c (in block bi) compares arguments base and base + 1, and
 * whether swapped (base + 1 first). */
static bool compares_pair(const sp_module *m, uint32_t bi, uint32_t c, int64_t base, bool *swapped)
{
    const sp_op *o = &m->ops[c];
    if (o->kind != SP_OP_COMPARE || o->n_operands != 2) {
        return false;
    }
    int64_t a0 = arg_of(m, bi, o->operands[0]), a1 = arg_of(m, bi, o->operands[1]);
    *swapped = a0 == base + 1 && a1 == base;
    return *swapped || (a0 == base && a1 == base + 1);
}

/* The input index whose pair of arguments compare op c (in comparator block
 * bi) compares, or -1. */
static int64_t compare_input(const sp_module *m, uint32_t bi, uint32_t c, bool *swapped)
{
    const sp_op *o = &m->ops[c];
    if (o->kind != SP_OP_COMPARE || o->n_operands != 2) {
        return -1;
    }
    int64_t a0 = arg_of(m, bi, o->operands[0]);
    int64_t base = a0 < 0 ? -1 : a0 - a0 % 2;
    return base >= 0 && compares_pair(m, bi, c, base, swapped) ? base / 2 : -1;
}

/* Appends the keys of sort comparator value v (in block bi): a compare LT or
 * GT of one input's pair of arguments, or `or(that, and(compare EQ of the
 * same pair and type, rest))` with the operands of or and and in any order
 * (JAX's lexicographic comparators). false for any other form. */
static bool comparator_keys(const sp_module *m, uint32_t bi, uint32_t v, ex_sort_key *keys,
                            uint32_t *nk, uint32_t depth)
{
    uint32_t d = def_in(m, bi, v);
    if (d == SP_NONE || *nk >= EX_SORT_MAX_KEYS || depth > 2 * EX_SORT_MAX_KEYS) {
        return false;
    }
    const sp_op *o = &m->ops[d];
    if (o->kind == SP_OP_COMPARE) {
        bool total, swapped;
        int dir = compare_dir(m, d, &total);
        int64_t in = compare_input(m, bi, d, &swapped);
        if (in < 0 || (dir != CMP_LT && dir != CMP_GT)) {
            return false;
        }
        keys[(*nk)++] = (ex_sort_key){(uint32_t)in, (dir == CMP_GT) != swapped, total};
        return true;
    }
    if (o->kind != SP_OP_OR || o->n_operands != 2) {
        return false;
    }
    for (uint32_t s = 0; s < 2; s++) {
        uint32_t lt = def_in(m, bi, o->operands[s]), an = def_in(m, bi, o->operands[1 - s]);
        if (lt == SP_NONE || an == SP_NONE || m->ops[an].kind != SP_OP_AND ||
            m->ops[an].n_operands != 2) {
            continue;
        }
        bool lt_total, lt_swapped;
        compare_dir(m, lt, &lt_total);
        int64_t in = compare_input(m, bi, lt, &lt_swapped);
        for (uint32_t t = 0; in >= 0 && t < 2; t++) {
            uint32_t eq = def_in(m, bi, m->ops[an].operands[t]);
            bool eq_total, eq_swapped;
            uint32_t mark = *nk;
            if (eq != SP_NONE && compare_dir(m, eq, &eq_total) == CMP_EQ && eq_total == lt_total &&
                compares_pair(m, bi, eq, 2 * in, &eq_swapped) &&
                comparator_keys(m, bi, o->operands[s], keys, nk, depth + 1) &&
                comparator_keys(m, bi, m->ops[an].operands[1 - t], keys, nk, depth + 1)) {
                return true;
            }
            *nk = mark;
        }
    }
    return false;
}

/* The value a one-block region returns (its last op a return of one value),
 * or SP_NONE. */
static uint32_t block_result(const sp_module *m, const sp_block *b)
{
    if (b == NULL || b->n_ops == 0) {
        return SP_NONE;
    }
    const sp_op *r = &m->ops[b->ops[b->n_ops - 1]];
    bool is_ret = r->kind == SP_OP_RETURN || r->kind == SP_OP_FUNC_RETURN;
    return is_ret && r->n_operands == 1 ? r->operands[0] : SP_NONE;
}

/* sort: the sort dimension in x->dim, the comparator's keys in x->ext (x->fn
 * of them). */
static cm_status prepare_sort(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    bool ok = o->n_operands >= 1 && o->n_results == o->n_operands;
    const sp_type *t0 = ok ? sp_value_type(m, o->operands[0]) : NULL;
    for (uint32_t j = 0; ok && j < o->n_operands; j++) {
        const sp_type *t = sp_value_type(m, o->operands[j]),
                      *rt = sp_value_type(m, o->first_result + j);
        ok = t->rank == t0->rank && rt->rank == t0->rank && rt->elem == t->elem;
        for (uint32_t k = 0; ok && k < t0->rank; k++) {
            ok = t->dims[k] == t0->dims[k] && rt->dims[k] == t0->dims[k];
        }
    }
    const sp_attr *d = sp_op_attr(m, x->op, "dimension");
    ok = ok && d != NULL && d->kind == SP_ATTR_INT;
    int64_t dim = ok ? d->u.i.v : 0;
    if (ok && dim < 0) {
        dim += (int64_t)t0->rank; /* the spec allows -rank <= dimension < 0 */
    }
    if (!ok || dim < 0 || dim >= (int64_t)t0->rank) {
        return op_error(p, x->op, err,
                        "op %s: operands, results or dimension the executor cannot read", nm);
    }
    x->dim = dim;
    ex_sort_key *keys = cm_arena_alloc(&p->arena, sizeof *keys * EX_SORT_MAX_KEYS);
    if (keys == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    const sp_block *b = body_block(m, x->op);
    uint32_t nk = 0, v = block_result(m, b);
    if (v == SP_NONE || b->n_args != 2 * o->n_operands ||
        !comparator_keys(m, o->regions[0].blocks[0], v, keys, &nk, 0)) {
        return op_error(p, x->op, err,
                        "%s with this comparator cannot be executed yet (it runs compare LT or "
                        "GT of one input's pair, or such compares combined lexicographically "
                        "as JAX emits them)",
                        nm);
    }
    x->ext = keys;
    x->fn = (int)nk;
    return CM_OK;
}

/* select_and_scatter: the window as reduce_window's (x->a, x->b, x->c), the
 * scatter body in x->fn, the select direction (CMP_GE/GT/LE/LT of the
 * current pick against a candidate) in x->dim, x->nd 1 for TOTALORDER. */
static cm_status prepare_select_scatter(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    if (o->n_operands != 3 || o->n_results != 1 || o->n_regions != 2) {
        return op_error(p, x->op, err, "op %s with these operands cannot be executed yet", nm);
    }
    const sp_block *sel = region_block(m, x->op, 0), *sc = region_block(m, x->op, 1);
    uint32_t cv = block_result(m, sel),
             c = cv == SP_NONE ? SP_NONE : def_in(m, o->regions[0].blocks[0], cv);
    bool total = false, swapped = false;
    int dir = c == SP_NONE ? -1 : compare_dir(m, c, &total);
    if (c == SP_NONE || sel->n_args != 2 ||
        !compares_pair(m, o->regions[0].blocks[0], c, 0, &swapped) ||
        (dir != CMP_GE && dir != CMP_GT && dir != CMP_LE && dir != CMP_LT)) {
        return op_error(p, x->op, err,
                        "%s with this select body cannot be executed yet (it runs compare GE, "
                        "GT, LE or LT of the two arguments)",
                        nm);
    }
    if (swapped) { /* b GE a is a LE b */
        dir = dir == CMP_GE ? CMP_LE : dir == CMP_LE ? CMP_GE : dir == CMP_GT ? CMP_LT : CMP_GT;
    }
    x->fn = block_reduce_fn(m, sc);
    if (x->fn != RED_ADD && x->fn != RED_MUL && x->fn != RED_MAX && x->fn != RED_MIN) {
        return op_error(p, x->op, err,
                        "%s with this scatter body cannot be executed yet (add, multiply, "
                        "maximum or minimum)",
                        nm);
    }
    x->dim = dir;
    x->nd = total ? 1u : 0u;
    const sp_type *t = sp_value_type(m, o->operands[0]), *srct = sp_value_type(m, o->operands[1]),
                  *rt = sp_value_type(m, o->first_result);
    bool ok;
    cm_status st_ = window_attrs(p, x, t->rank, &ok, err);
    if (st_ != CM_OK) {
        return st_;
    }
    if (!ok || !window_count_ok(x, t, srct) || rt->rank != t->rank) {
        return op_error(p, x->op, err, "op %s: attributes the executor cannot read", nm);
    }
    for (uint32_t k = 0; k < t->rank; k++) {
        ok = ok && rt->dims[k] == t->dims[k];
    }
    ok = ok && srct->elem == t->elem && rt->elem == t->elem &&
         sp_value_type(m, o->operands[2])->elem == t->elem &&
         sp_value_type(m, o->operands[2])->rank == 0;
    if (!ok) {
        return op_error(p, x->op, err, "op %s: shapes or types the executor cannot run", nm);
    }
    if (t->elem != SP_ELEM_F32 && t->elem != SP_ELEM_F64) {
        return op_error(p, x->op, err, "%s on %s cannot be executed yet (f32 and f64 only)", nm,
                        t->text);
    }
    return CM_OK;
}

/* pad, dynamic_slice, dynamic_update_slice: attribute and operand checks. */
static cm_status prepare_slicing(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const sp_type *t = sp_value_type(m, o->operands[0]), *rt = sp_value_type(m, o->first_result);
    bool ok = o->n_results == 1 && t->rank == rt->rank;
    if (x->kind == SP_OP_PAD) {
        ok = ok && o->n_operands == 2 && ints_attr(p, x->op, "edge_padding_low", &x->a, &x->na) &&
             ints_attr(p, x->op, "edge_padding_high", &x->b, &x->nb) &&
             ints_attr(p, x->op, "interior_padding", &x->c, &x->nc) && x->na == t->rank &&
             x->nb == t->rank && x->nc == t->rank && sp_value_type(m, o->operands[1])->rank == 0 &&
             sp_value_type(m, o->operands[1])->elem == t->elem && rt->elem == t->elem;
        for (uint32_t k = 0; ok && k < t->rank; k++) {
            int64_t n = t->dims[k];
            ok = x->c[k] >= 0 &&
                 rt->dims[k] == x->a[k] + x->b[k] + n + (n > 0 ? (n - 1) * x->c[k] : 0);
        }
    } else {
        uint32_t first = x->kind == SP_OP_DYNAMIC_SLICE ? 1u : 2u;
        ok = ok && o->n_operands == first + t->rank;
        for (uint32_t j = first; ok && j < o->n_operands; j++) {
            const sp_type *st_ = sp_value_type(m, o->operands[j]);
            ok = st_->rank == 0 && is_int_elem(st_->elem);
        }
        if (ok && x->kind == SP_OP_DYNAMIC_SLICE) {
            ok = ints_attr(p, x->op, "slice_sizes", &x->a, &x->na) && x->na == t->rank &&
                 rt->elem == t->elem;
            for (uint32_t k = 0; ok && k < t->rank; k++) {
                ok = x->a[k] >= 0 && x->a[k] <= t->dims[k] && rt->dims[k] == x->a[k];
            }
        } else if (ok) {
            const sp_type *ut = sp_value_type(m, o->operands[1]);
            ok = ut->rank == t->rank && ut->elem == t->elem && rt->elem == t->elem;
            for (uint32_t k = 0; ok && k < t->rank; k++) {
                ok = ut->dims[k] <= t->dims[k] && rt->dims[k] == t->dims[k];
            }
        }
    }
    if (!ok) {
        return op_error(p, x->op, err, "op %s: operands or attributes the executor cannot run",
                        o->name);
    }
    return CM_OK;
}

static cm_status prepare_op(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    x->kind = (sp_op_kind)o->kind;
    bool ok = true;
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
    case SP_OP_NOT:
    case SP_OP_NEGATE:
    case SP_OP_EXPONENTIAL:
    case SP_OP_TANH:
    case SP_OP_ABS:
    case SP_OP_SQRT:
    case SP_OP_RSQRT:
    case SP_OP_LOG:
    case SP_OP_LOGISTIC:
    case SP_OP_SELECT:
    case SP_OP_CONVERT:
    case SP_OP_RESHAPE:
    case SP_OP_FUNC_RETURN:
    case SP_OP_RETURN:
    case SP_OP_SDY_RETURN:
        break;
    case SP_OP_COMPARE: {
        bool total;
        x->fn = compare_dir(m, x->op, &total);
        ok = x->fn >= 0 && o->n_operands == 2;
        x->nd = ok && total && elem_float(sp_value_type(m, o->operands[0])->elem) ? 1u : 0u;
        break;
    }
    case SP_OP_CONSTANT:
        return parse_constant(p, x, sp_op_attr(m, x->op, "value"),
                              sp_value_type(m, o->first_result)->elem,
                              count_of(sp_value_type(m, o->first_result)->dims,
                                       sp_value_type(m, o->first_result)->rank),
                              err);
    case SP_OP_IOTA: {
        const sp_attr *a = sp_op_attr(m, x->op, "iota_dimension");
        ok = a != NULL && a->kind == SP_ATTR_INT;
        x->dim = ok ? a->u.i.v : 0;
        break;
    }
    case SP_OP_CONCATENATE: {
        const sp_attr *a = sp_op_attr(m, x->op, "dimension");
        ok = a != NULL && a->kind == SP_ATTR_INT;
        x->dim = ok ? a->u.i.v : 0;
        break;
    }
    case SP_OP_BROADCAST_IN_DIM:
        ok = ints_attr(p, x->op, "broadcast_dimensions", &x->a, &x->na);
        break;
    case SP_OP_TRANSPOSE:
        ok = ints_attr(p, x->op, "permutation", &x->a, &x->na);
        break;
    case SP_OP_SLICE:
        ok = ints_attr(p, x->op, "start_indices", &x->a, &x->na) &&
             ints_attr(p, x->op, "limit_indices", &x->b, &x->nb) &&
             ints_attr(p, x->op, "strides", &x->c, &x->nc);
        break;
    case SP_OP_REDUCE:
        ok = o->n_operands == 2 && o->n_results == 1 &&
             ints_attr(p, x->op, "dimensions", &x->a, &x->na);
        x->fn = reduce_body(m, x->op);
        if (ok && x->fn < 0) {
            return op_error(p, x->op, err, "%s with this body cannot be executed yet", nm);
        }
        break;
    case SP_OP_DOT_GENERAL: {
        const sp_attr *dn = sp_op_attr(m, x->op, "dot_dimension_numbers");
        x->na = x->nb = x->nc = x->nd = 0;
        const sp_attr *lb = params_item(dn, "lhs_batching_dimensions");
        const sp_attr *rb = params_item(dn, "rhs_batching_dimensions");
        const sp_attr *lc = params_item(dn, "lhs_contracting_dimensions");
        const sp_attr *rc = params_item(dn, "rhs_contracting_dimensions");
        ok = dn != NULL && (lb == NULL || sp_attr_ints(lb, &x->a, &x->na, &p->arena)) &&
             (rb == NULL || sp_attr_ints(rb, &x->b, &x->nb, &p->arena)) &&
             (lc == NULL || sp_attr_ints(lc, &x->c, &x->nc, &p->arena)) &&
             (rc == NULL || sp_attr_ints(rc, &x->d, &x->nd, &p->arena)) && x->na == x->nb &&
             x->nc == x->nd && dot_dims_ok(m, o->operands[0], x->a, x->na, x->c, x->nc) &&
             dot_dims_ok(m, o->operands[1], x->b, x->nb, x->d, x->nd);
        sp_elem e = sp_value_type(m, o->first_result)->elem;
        sp_elem le = sp_value_type(m, o->operands[0])->elem;
        sp_elem re = sp_value_type(m, o->operands[1])->elem;
        bool floats = (e == SP_ELEM_F32 || e == SP_ELEM_F64) && le == e && re == e;
        bool ints = is_int_elem(e) && is_int_elem(le) && is_int_elem(re);
        if (ok && !floats && !ints) {
            return op_error(p, x->op, err,
                            "%s on these element types cannot be executed yet (f32 or f64 "
                            "throughout, or integers)",
                            nm);
        }
        break;
    }
    case SP_OP_PAD:
    case SP_OP_DYNAMIC_SLICE:
    case SP_OP_DYNAMIC_UPDATE_SLICE:
        return prepare_slicing(p, x, err);
    case SP_OP_GATHER:
        return prepare_gather(p, x, err);
    case SP_OP_SCATTER:
        return prepare_scatter(p, x, err);
    case SP_OP_CONVOLUTION:
        return prepare_conv(p, x, err);
    case SP_OP_REDUCE_WINDOW:
        return prepare_reduce_window(p, x, err);
    case SP_OP_SORT:
        return prepare_sort(p, x, err);
    case SP_OP_SELECT_AND_SCATTER:
        return prepare_select_scatter(p, x, err);
    case SP_OP_SDY_ALL_REDUCE:
        return p->replicated ? CM_OK : prepare_groups(p, x, "reduction_axes", err);
    case SP_OP_SDY_ALL_GATHER:
        return p->replicated ? CM_OK : prepare_groups(p, x, "gathering_axes", err);
    case SP_OP_SDY_ALL_SLICE:
        return p->replicated ? CM_OK : prepare_groups(p, x, "slicing_axes", err);
    case SP_OP_SDY_ALL_TO_ALL:
        return p->replicated ? CM_OK : prepare_groups(p, x, "params", err);
    case SP_OP_SDY_REDUCE_SCATTER:
        return p->replicated ? CM_OK : prepare_groups(p, x, "reduce_scatter_axes", err);
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
    case SP_OP_SDY_RESHARD:
    case SP_OP_SDY_SHARDING_CONSTRAINT:
        /* Constraints and reshards move data when the shardings differ. */
        x->local = same_blocks(p, o->operands[0], o->first_result);
        return p->replicated || x->local ? CM_OK : prepare_groups(p, x, NULL, err);
    default:
        return op_error(p, x->op, err, "op %s cannot be executed yet", nm);
    }
    if (!ok) {
        return op_error(p, x->op, err, "op %s: attributes the executor cannot read", nm);
    }
    return CM_OK;
}

static void prog_fini(prog *p)
{
    cm_free(p->vi);
    cm_free(p->pbs);
    cm_arena_fini(&p->arena);
}

uint32_t ex_module_devices(const sp_module *m)
{
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *o = &m->ops[body->ops[i]];
        if (o->kind == SP_OP_SDY_MESH) {
            const sp_attr *a = sp_attrs_get(o->attrs, o->n_attrs, "mesh");
            if (a != NULL && a->kind == SP_ATTR_MESH && a->u.mesh->n_axes > 0) {
                return (uint32_t)sp_mesh_size(a->u.mesh);
            }
        }
    }
    return 1;
}

/* ---- control flow: preparation ---------------------------------------------------
 * Every block the workers run (main, called functions, while conditions and
 * bodies, case/if branches, manual computation bodies) is prepared once, in
 * program order, into a
 * pblock indexed by its block id; a function called from several places
 * shares its pblock, and each call gets fresh buffers at run time. A value
 * belongs to the block that defines it (its home), which frees it after its
 * last use there: a use inside a nested region counts as a use by the
 * enclosing op of the home block, so a value read by a loop body lives until
 * the loop ends. */

/* Records that the op at index idx of block blk uses v. */
static cm_status note_use(prog *p, uint32_t v, uint32_t blk, uint32_t idx, uint32_t op,
                          cm_error *err)
{
    vinfo *vi = &p->vi[v];
    if (!vi->live) {
        return op_error(p, op, err, "%s: operand defined outside the blocks the executor runs",
                        p->m->ops[op].name);
    }
    if (vi->home == blk) {
        vi->last_use = idx;
        vi->inner_last = false;
        return CM_OK;
    }
    for (uint32_t k = p->n_nest; k-- > p->nest_base;) {
        if (p->nest_blk[k] == vi->home) {
            vi->last_use = p->nest_idx[k];
            vi->inner_last = true;
            return CM_OK;
        }
    }
    return op_error(p, op, err, "%s: operand from a block that does not enclose it",
                    p->m->ops[op].name);
}

/* Prepares a block's arguments and sets their home. */
static cm_status prepare_args(prog *p, uint32_t blk, uint32_t op_for_err, bool borrowed,
                              cm_error *err)
{
    const sp_block *b = &p->m->blocks[blk];
    for (uint32_t i = 0; i < b->n_args; i++) {
        uint32_t v = b->first_arg + i;
        cm_status st = value_prepare(p, v, op_for_err, err);
        if (st != CM_OK) {
            return st;
        }
        p->vi[v].home = blk;
        p->vi[v].def_idx = 0;
        p->vi[v].borrowed = borrowed;
    }
    return CM_OK;
}

/* Whether values a[i] and first_b + i have the same types (types are
 * interned). */
static bool same_types(const sp_module *m, const uint32_t *a, uint32_t first_b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (m->values[a[i]].type != m->values[first_b + i].type) {
            return false;
        }
    }
    return true;
}

/* The terminator of prepared block blk (*t_out), which must be a `kind`
 * return of n values (owner: the op to blame otherwise). */
static cm_status block_return(prog *p, uint32_t blk, uint32_t owner, sp_op_kind kind, uint32_t n,
                              const sp_op **t_out, cm_error *err)
{
    const pblock *pb = &p->pbs[blk];
    const sp_op *t = pb->n_ops > 0 ? &p->m->ops[pb->ops[pb->n_ops - 1].op] : NULL;
    if (t == NULL || t->kind != (uint32_t)kind) {
        return op_error(p, owner, err, "%s: a region or function that does not end with %s",
                        p->m->ops[owner].name, sp_op_kind_name(kind));
    }
    if (t->n_operands != n) {
        return op_error(p, pb->ops[pb->n_ops - 1].op, err, "%s: returns %u values, %u expected",
                        t->name, t->n_operands, n);
    }
    *t_out = t;
    return CM_OK;
}

static cm_status prepare_block(prog *p, uint32_t blk, uint32_t depth, cm_error *err);

/* Block blk, run like a called function by op x (func.call, or
 * sdy.named_computation with its region): arguments borrowed from x's
 * operands and a scope of its own (functions and named computations are
 * isolated from above), prepared once; ret: the kind of its return, whose
 * values become x's results. owner (the function, or x) and what name the
 * callee in errors. */
static cm_status prepare_callee(prog *p, xop *x, uint32_t blk, uint32_t owner, uint32_t depth,
                                sp_op_kind ret, const char *what, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const pblock *pb = &p->pbs[blk];
    const sp_block *b = &m->blocks[blk];
    if (b->n_args != o->n_operands || !same_types(m, o->operands, b->first_arg, b->n_args)) {
        return op_error(p, x->op, err, "%s: operands do not match the arguments of %s", o->name,
                        what);
    }
    if (!pb->done) {
        uint32_t base = p->nest_base;
        p->nest_base = p->n_nest;
        cm_status st = prepare_args(p, blk, owner, true, err);
        if (st == CM_OK) {
            st = prepare_block(p, blk, depth + 1u, err);
        }
        p->nest_base = base;
        if (st != CM_OK) {
            return st;
        }
    } else if (depth + 1u + pb->height > EX_MAX_NEST) {
        return op_error(p, x->op, err, "calls and regions nested deeper than %d cannot be executed",
                        EX_MAX_NEST);
    }
    const sp_op *t = NULL;
    cm_status st = block_return(p, blk, x->op, ret, o->n_results, &t, err);
    if (st != CM_OK) {
        return st;
    }
    if (!same_types(m, t->operands, o->first_result, o->n_results)) {
        return op_error(p, x->op, err, "%s: results do not match what %s returns", o->name,
                        what);
    }
    x->sub = cm_arena_alloc(&p->arena, sizeof(uint32_t));
    if (x->sub == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    x->sub[0] = blk;
    x->n_sub = 1;
    return CM_OK;
}

/* func.call: the callee's body (prepare_callee). */
static cm_status prepare_call(prog *p, xop *x, uint32_t depth, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_attr *c = sp_op_attr(m, x->op, "callee");
    if (c == NULL || c->kind != SP_ATTR_SYMBOL) {
        return op_error(p, x->op, err, "func.call without a callee");
    }
    uint32_t f = sp_module_func(m, c->u.sym);
    if (f == SP_NONE) {
        return op_error(p, x->op, err, "func.call: no function @%s in the module", c->u.sym);
    }
    if (m->ops[f].n_regions != 1 || m->ops[f].regions[0].n_blocks != 1) {
        return op_error(p, x->op, err,
                        "func.call: @%s has several blocks or none; it cannot be executed yet",
                        c->u.sym);
    }
    uint32_t blk = m->ops[f].regions[0].blocks[0];
    const pblock *pb = &p->pbs[blk];
    if (pb->busy) {
        return op_error(p, x->op, err, "func.call: recursive call to @%s cannot be executed",
                        c->u.sym);
    }
    if (pb->done && pb->manual != p->in_manual) {
        return op_error(p, x->op, err,
                        "func.call: @%s called both inside and outside sdy.manual_computation "
                        "cannot be executed yet",
                        c->u.sym);
    }
    char what[160];
    snprintf(what, sizeof what, "@%s", c->u.sym);
    return prepare_callee(p, x, blk, f, depth, SP_OP_FUNC_RETURN, what, err);
}

/* sdy.named_computation: its region, run like a called function (its
 * in/out shardings are not used: the partitioner holds the region's
 * arguments replicated, as it sees them). */
static cm_status prepare_named(prog *p, xop *x, uint32_t depth, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        return op_error(p, x->op, err, "%s: a region with several blocks cannot be executed yet",
                        o->name);
    }
    return prepare_callee(p, x, o->regions[0].blocks[0], x->op, depth, SP_OP_SDY_RETURN,
                          "its region", err);
}

/* The regions of a while, case or if (op at index idx of block blk): each
 * one block, prepared inside the op's scope. */
static cm_status prepare_regions(prog *p, xop *x, uint32_t blk, uint32_t idx, uint32_t depth,
                                 cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    bool is_while = x->kind == SP_OP_WHILE;
    if ((is_while && (o->n_regions != 2 || o->n_operands != o->n_results)) ||
        (x->kind == SP_OP_IF && (o->n_regions != 2 || o->n_operands != 1)) ||
        (x->kind == SP_OP_CASE && (o->n_regions < 1 || o->n_operands != 1))) {
        return op_error(p, x->op, err, "%s: operands or regions the executor cannot run", o->name);
    }
    if (!is_while) {
        const vinfo *ix = &p->vi[o->operands[0]];
        bool ok = ix->rank == 0 &&
                  (x->kind == SP_OP_IF ? ix->elem == SP_ELEM_I1
                                       : is_int_elem(ix->elem) && ix->elem != SP_ELEM_I1);
        if (!ok) {
            return op_error(p, x->op, err, "%s: the %s must be a 0-d %s tensor", o->name,
                            x->kind == SP_OP_IF ? "predicate" : "index",
                            x->kind == SP_OP_IF ? "i1" : "integer");
        }
    }
    x->n_sub = o->n_regions;
    x->sub = cm_arena_alloc(&p->arena, sizeof(uint32_t) * x->n_sub);
    if (x->sub == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    for (uint32_t r = 0; r < o->n_regions; r++) {
        if (o->regions[r].n_blocks != 1) {
            return op_error(p, x->op, err, "%s: a region with several blocks cannot be executed yet",
                            o->name);
        }
        x->sub[r] = o->regions[r].blocks[0];
        const sp_block *b = &m->blocks[x->sub[r]];
        bool args_ok = is_while ? b->n_args == o->n_operands &&
                                      same_types(m, o->operands, b->first_arg, b->n_args)
                                : b->n_args == 0;
        if (!args_ok) {
            return op_error(p, x->op, err, "%s: region arguments do not match its operands",
                            o->name);
        }
    }
    p->nest_blk[p->n_nest] = blk;
    p->nest_idx[p->n_nest] = idx;
    p->n_nest++;
    cm_status st = CM_OK;
    for (uint32_t r = 0; r < x->n_sub && st == CM_OK; r++) {
        /* a while's condition reads the loop's values; its body takes them */
        st = prepare_args(p, x->sub[r], x->op, is_while && r == 0, err);
        if (st == CM_OK) {
            st = prepare_block(p, x->sub[r], depth + 1u, err);
        }
    }
    p->n_nest--;
    for (uint32_t r = 0; r < x->n_sub && st == CM_OK; r++) {
        bool cond = is_while && r == 0;
        const sp_op *t = NULL;
        st = block_return(p, x->sub[r], x->op, SP_OP_RETURN, cond ? 1u : o->n_results, &t, err);
        if (st != CM_OK) {
            return st;
        }
        bool ok = cond ? p->vi[t->operands[0]].rank == 0 &&
                             p->vi[t->operands[0]].elem == SP_ELEM_I1
                       : same_types(m, t->operands, o->first_result, o->n_results);
        if (!ok) {
            return op_error(p, x->op, err, "%s: %s", o->name,
                            cond ? "the condition must return a 0-d i1 tensor"
                                 : "a region returns values whose types differ from the results");
        }
    }
    return st;
}

/* sdy collectives that move data between devices (reshards and constraints
 * are copies when every value is held whole). */
static bool moves_data(sp_op_kind k)
{
    return k == SP_OP_SDY_ALL_REDUCE || k == SP_OP_SDY_ALL_GATHER || k == SP_OP_SDY_ALL_SLICE ||
           k == SP_OP_SDY_ALL_TO_ALL || k == SP_OP_SDY_REDUCE_SCATTER ||
           k == SP_OP_SDY_COLLECTIVE_PERMUTE;
}

#define EX_MAX_MANUAL_GROUPS 4096 /* manual groups of a reference run */

/* A prepared sdy.manual_computation (xop.ext). The body runs once per unit:
 * on every device for its own manual group, or, in the reference run, on
 * the one worker for every manual group in turn. Each operand's and
 * result's unit offsets place the group's local tensor in the global one. */
typedef struct manual {
    uint32_t n_units;
    int64_t **in_off;  /* per operand: n_units * rank global offsets */
    int64_t **out_off; /* per result: likewise */
    bool *first;       /* per unit: the first device of its manual group */
} manual;

/* Whether axis name is one of the manual axes. */
static bool is_manual_axis(const sp_attr *axes, const char *name)
{
    for (uint32_t i = 0; i < axes->u.axes.n; i++) {
        if (strcmp(axes->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* Offsets (n_units * rank) of the manual groups' local tensors of value v
 * (global type) in sharding s, for the mesh coordinates of each unit
 * (coords: n_units * mesh axes). The manual axes must lead each dimension,
 * divide it and give the local type of body value lv. */
static cm_status manual_offsets(prog *p, const xop *x, const sp_attr *axes, const sp_mesh *mesh,
                                const sp_sharding *s, uint32_t v, uint32_t lv,
                                const int64_t *coords, uint32_t n_units, int64_t **off_out,
                                cm_error *err)
{
    const sp_type *g = sp_value_type(p->m, v), *l = sp_value_type(p->m, lv);
    const char *nm = p->m->ops[x->op].name;
    if (s == NULL || s->rank != g->rank || g->rank != l->rank || g->elem != l->elem) {
        return op_error(p, x->op, err, "%s: a sharding or local type that does not match %s", nm,
                        g->text);
    }
    int64_t *off = cm_arena_zalloc(&p->arena, sizeof(int64_t) * ((size_t)n_units * g->rank + 1u));
    if (off == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    for (uint32_t k = 0; k < g->rank; k++) {
        int64_t count = 1;
        uint32_t lead = 0;
        for (uint32_t j = 0; j < s->dims[k].n_axes; j++) {
            const sp_axis_ref *r = &s->dims[k].axes[j];
            if (!is_manual_axis(axes, r->name)) {
                continue;
            }
            int32_t ai = sp_mesh_axis_index(mesh, r->name);
            if (ai < 0 || r->pre_size > 0 || lead != j) {
                return op_error(p, x->op, err,
                                "%s: manual axis %s must be a whole mesh axis leading its "
                                "dimension",
                                nm, r->name);
            }
            lead++;
            count *= mesh->axes[ai].size;
        }
        if (g->dims[k] % count != 0 || g->dims[k] / count != l->dims[k]) {
            return op_error(p, x->op, err, "%s: local type %s is not %s split over the manual axes",
                            nm, l->text, g->text);
        }
        for (uint32_t u = 0; u < n_units; u++) {
            int64_t idx = 0;
            for (uint32_t j = 0; j < lead; j++) {
                int32_t ai = sp_mesh_axis_index(mesh, s->dims[k].axes[j].name);
                idx = idx * mesh->axes[ai].size + coords[(size_t)u * mesh->n_axes + (uint32_t)ai];
            }
            off[(size_t)u * g->rank + k] = idx * l->dims[k];
        }
    }
    *off_out = off;
    return CM_OK;
}

/* sdy.manual_computation: the units (every device, or every manual group
 * in the reference run), the offsets of each operand and result, and the
 * body, prepared with every value held whole. */
static cm_status prepare_manual(prog *p, xop *x, uint32_t depth, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const sp_attr *in = sp_op_attr(m, x->op, "in_shardings");
    const sp_attr *out = sp_op_attr(m, x->op, "out_shardings");
    const sp_attr *axes = sp_op_attr(m, x->op, "manual_axes");
    if (p->in_manual) {
        return op_error(p, x->op, err, "nested %s cannot be executed yet", o->name);
    }
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1 || in == NULL ||
        in->kind != SP_ATTR_SHARDING_LIST || in->u.shardings.n != o->n_operands || out == NULL ||
        out->kind != SP_ATTR_SHARDING_LIST || out->u.shardings.n != o->n_results ||
        axes == NULL || axes->kind != SP_ATTR_AXIS_LIST ||
        m->blocks[o->regions[0].blocks[0]].n_args != o->n_operands) {
        return op_error(p, x->op, err, "%s: operands, shardings or region the executor cannot run",
                        o->name);
    }
    const sp_mesh *mesh = NULL;
    for (uint32_t i = 0; i < o->n_operands + o->n_results; i++) {
        const sp_sharding *s = i < o->n_operands ? in->u.shardings.items[i]
                                                 : out->u.shardings.items[i - o->n_operands];
        const sp_mesh *sm = s != NULL ? sharding_mesh(m, s) : NULL;
        if (sm == NULL || (mesh != NULL && sm != mesh)) {
            return op_error(p, x->op, err, "%s: shardings on unknown or different meshes", o->name);
        }
        mesh = sm;
    }
    if (mesh == NULL) {
        return op_error(p, x->op, err, "%s without operands or results", o->name);
    }
    uint32_t blk = o->regions[0].blocks[0];
    const sp_block *b = &m->blocks[blk];
    manual *mc = cm_arena_zalloc(&p->arena, sizeof(manual));
    if (mc == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    /* Units and their mesh coordinates: each device at its mesh position,
     * or each combination of the manual axes (free axes at 0). */
    int64_t groups = 1;
    for (uint32_t a = 0; a < mesh->n_axes; a++) {
        if (is_manual_axis(axes, mesh->axes[a].name)) {
            groups *= mesh->axes[a].size;
        }
        if (groups > EX_MAX_MANUAL_GROUPS) {
            return op_error(p, x->op, err, "%s: more than %d manual groups cannot be executed",
                            o->name, EX_MAX_MANUAL_GROUPS);
        }
    }
    if (!p->replicated && sp_mesh_size(mesh) != (int64_t)p->n_dev) {
        return op_error(p, x->op, err,
                        "%s on a mesh whose size is not the device count cannot be executed yet",
                        o->name);
    }
    mc->n_units = p->replicated ? (uint32_t)groups : p->n_dev;
    int64_t *coords = cm_arena_zalloc(&p->arena,
                                      sizeof(int64_t) * ((size_t)mc->n_units * mesh->n_axes + 1u));
    int64_t *gid = cm_arena_zalloc(&p->arena, sizeof(int64_t) * ((size_t)mc->n_units + 1u));
    bool *seen = cm_arena_zalloc(&p->arena, (size_t)groups + 1u);
    mc->first = cm_arena_zalloc(&p->arena, (size_t)mc->n_units + 1u);
    mc->in_off = cm_arena_zalloc(&p->arena, sizeof(int64_t *) * (o->n_operands + 1u));
    mc->out_off = cm_arena_zalloc(&p->arena, sizeof(int64_t *) * (o->n_results + 1u));
    if (coords == NULL || gid == NULL || seen == NULL || mc->first == NULL ||
        mc->in_off == NULL || mc->out_off == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    for (uint32_t u = 0; u < mc->n_units; u++) {
        int64_t *c = &coords[(size_t)u * mesh->n_axes];
        int64_t pos = p->replicated ? (int64_t)u : mesh_position(mesh, u);
        if (pos < 0) {
            return op_error(p, x->op, err, "%s: device missing from its mesh", o->name);
        }
        for (uint32_t a = mesh->n_axes; a-- > 0;) {
            bool man = is_manual_axis(axes, mesh->axes[a].name);
            if (p->replicated && !man) {
                continue; /* free axes at 0; pos counts the manual axes only */
            }
            c[a] = pos % mesh->axes[a].size;
            pos /= mesh->axes[a].size;
        }
        for (uint32_t a = 0; a < mesh->n_axes; a++) {
            if (is_manual_axis(axes, mesh->axes[a].name)) {
                gid[u] = gid[u] * mesh->axes[a].size + c[a];
            }
        }
        mc->first[u] = !seen[gid[u]];
        seen[gid[u]] = true;
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < o->n_operands && st == CM_OK; i++) {
        st = manual_offsets(p, x, axes, mesh, in->u.shardings.items[i], o->operands[i],
                            b->first_arg + i, coords, mc->n_units, &mc->in_off[i], err);
    }
    x->ext = mc;
    x->sub = cm_arena_alloc(&p->arena, sizeof(uint32_t));
    if (st == CM_OK && x->sub == NULL) {
        st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    if (st != CM_OK) {
        return st;
    }
    x->sub[0] = blk;
    x->n_sub = 1;
    uint32_t base = p->nest_base;
    p->nest_base = p->n_nest; /* isolated from above */
    p->in_manual = true;
    st = prepare_args(p, blk, x->op, false, err);
    if (st == CM_OK) {
        st = prepare_block(p, blk, depth + 1u, err);
    }
    p->in_manual = false;
    p->nest_base = base;
    if (st != CM_OK) {
        return st;
    }
    const sp_op *t = NULL;
    st = block_return(p, blk, x->op, SP_OP_SDY_RETURN, o->n_results, &t, err);
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t j = 0; j < o->n_results && st == CM_OK; j++) {
        st = manual_offsets(p, x, axes, mesh, out->u.shardings.items[j], o->first_result + j,
                            t->operands[j], coords, mc->n_units, &mc->out_off[j], err);
    }
    return st;
}

/* Prepares block blk's ops (its arguments are prepared by the caller). */
static cm_status prepare_block(prog *p, uint32_t blk, uint32_t depth, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_block *b = &m->blocks[blk];
    pblock *pb = &p->pbs[blk];
    uint32_t owner = b->parent_op;
    if (depth > EX_MAX_NEST || p->n_nest >= EX_MAX_NEST) {
        return op_error(p, owner, err, "calls and regions nested deeper than %d cannot be executed",
                        EX_MAX_NEST);
    }
    pb->busy = true;
    pb->manual = p->in_manual;
    pb->ops = cm_arena_zalloc(&p->arena, sizeof(xop) * (b->n_ops + 1u));
    if (pb->ops == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    pb->n_ops = b->n_ops;
    uint32_t height = 0;
    for (uint32_t i = 0; i < b->n_ops; i++) {
        /* pb stays valid: pbs is allocated once, for every block */
        xop *x = &pb->ops[i];
        x->op = b->ops[i];
        const sp_op *o = &m->ops[x->op];
        x->kind = (sp_op_kind)o->kind;
        for (uint32_t j = 0; j < o->n_operands; j++) {
            cm_status st = note_use(p, o->operands[j], blk, i, x->op, err);
            if (st != CM_OK) {
                return st;
            }
        }
        cm_status st = CM_OK;
        for (uint32_t j = 0; j < o->n_results && st == CM_OK; j++) {
            st = value_prepare(p, o->first_result + j, x->op, err);
            p->vi[o->first_result + j].home = blk;
            p->vi[o->first_result + j].def_idx = i;
        }
        bool term = x->kind == SP_OP_FUNC_RETURN || x->kind == SP_OP_RETURN ||
                    x->kind == SP_OP_SDY_RETURN;
        if (st == CM_OK && term != (i + 1u == b->n_ops)) {
            st = op_error(p, x->op, err, "%s: %s", o->name,
                          term ? "a return before the end of its block"
                               : "a block that does not end with a return");
        }
        if (st != CM_OK) {
            return st;
        }
        if (x->kind == SP_OP_WHILE || x->kind == SP_OP_CASE || x->kind == SP_OP_IF) {
            st = prepare_regions(p, x, blk, i, depth, err);
        } else if (x->kind == SP_OP_FUNC_CALL) {
            st = prepare_call(p, x, depth, err);
        } else if (x->kind == SP_OP_SDY_NAMED_COMPUTATION) {
            st = prepare_named(p, x, depth, err);
        } else if (x->kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            st = prepare_manual(p, x, depth, err);
        } else if (p->in_manual && moves_data(x->kind)) {
            st = op_error(p, x->op, err, "op %s inside sdy.manual_computation cannot be executed yet",
                          o->name);
        } else {
            st = prepare_op(p, x, err);
        }
        if (st != CM_OK) {
            return st;
        }
        for (uint32_t k = 0; k < x->n_sub; k++) {
            uint32_t h = 1u + p->pbs[x->sub[k]].height;
            height = h > height ? h : height;
        }
    }
    pb->height = height;
    pb->busy = false;
    pb->done = true;
    return CM_OK;
}

/* Fills each op's list of values released after it: every value that is
 * not main's argument or result, nor a while condition's argument, at its
 * last use in its home block (right after its definition when unused). */
static cm_status prepare_dead(prog *p, cm_error *err)
{
    const sp_module *m = p->m;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t v = 0; v < m->n_values; v++) {
            const vinfo *vi = &p->vi[v];
            if (!vi->live || vi->is_arg || vi->is_result || vi->borrowed) {
                continue;
            }
            xop *x = &p->pbs[vi->home].ops[vi->last_use != UINT32_MAX ? vi->last_use
                                                                       : vi->def_idx];
            if (pass == 0) {
                x->n_dead++;
            } else {
                x->dead[x->n_dead++] = v;
            }
        }
        for (uint32_t blk = 0; blk < m->n_blocks; blk++) {
            const pblock *pb = &p->pbs[blk];
            for (uint32_t i = 0; pass == 0 && i < pb->n_ops; i++) {
                xop *x = &pb->ops[i];
                x->dead = cm_arena_alloc(&p->arena, sizeof(uint32_t) * (x->n_dead + 1u));
                if (x->dead == NULL) {
                    return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
                }
                x->n_dead = 0;
            }
        }
    }
    return CM_OK;
}

/* Whether v's buffer is released right after op x. */
static bool dies_at(const xop *x, uint32_t v)
{
    for (uint32_t i = 0; i < x->n_dead; i++) {
        if (x->dead[i] == v) {
            return true;
        }
    }
    return false;
}

static cm_status prog_init(prog *p, const sp_module *m, uint32_t n_dev, bool replicated,
                           cm_error *err)
{
    memset(p, 0, sizeof *p);
    cm_arena_init(&p->arena, 0);
    p->m = m;
    p->n_dev = n_dev;
    p->replicated = replicated;
    uint32_t f = sp_module_func(m, "main");
    if (f == SP_NONE) {
        return cm_error_set(err, CM_EINVAL, NULL, "the module has no function @main");
    }
    if (m->ops[f].n_regions != 1 || m->ops[f].regions[0].n_blocks != 1) {
        return op_error(p, f, err, "%s: a main with several blocks cannot be executed yet",
                        "func.func");
    }
    p->block = m->ops[f].regions[0].blocks[0];
    const sp_block *b = &m->blocks[p->block];
    p->vi = cm_calloc(m->n_values + 1u, sizeof(vinfo));
    p->pbs = cm_calloc(m->n_blocks + 1u, sizeof(pblock));
    if (p->vi == NULL || p->pbs == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    cm_status st = prepare_args(p, p->block, f, false, err);
    if (st == CM_OK) {
        st = prepare_block(p, p->block, 0, err);
    }
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < b->n_args; i++) {
        p->vi[b->first_arg + i].is_arg = true;
    }
    const pblock *pb = &p->pbs[p->block];
    if (pb->n_ops == 0 || pb->ops[pb->n_ops - 1].kind != SP_OP_FUNC_RETURN) {
        return cm_error_set(err, CM_EINVAL, NULL, "main has no return");
    }
    p->ret = pb->ops[pb->n_ops - 1].op;
    const sp_op *o = &m->ops[p->ret];
    for (uint32_t j = 0; j < o->n_operands; j++) {
        p->vi[o->operands[j]].is_result = true;
    }
    return prepare_dead(p, err);
}

/* ---- workers ------------------------------------------------------------------ */

typedef struct shared {
    prog *p;
    pthread_barrier_t bar;
    atomic_int failed;
    atomic_size_t next_item; /* the running collective's next work item (coll_run) */
    void **scratch;          /* per worker: NULL or COLL_ITEM bytes (redistribute_item) */
    void **bufs;          /* n_dev * 2 * n_values: each device's buffer of every value,
                             then its spare buffers (alloc_value) */
    void **argbufs;       /* n_dev * n_args local argument shards */
    uint32_t n_args;
    uint32_t iters;
    double *iter_s;
    double *op_s;     /* ex_exec_opts.op_s, or NULL */
    uint32_t op_from;
    void (*between)(void *ctx); /* ex_exec_run_paced */
    void *between_ctx;
    cm_error *errs;       /* per worker */
    int64_t *votes;       /* 2 * n_dev: each device's control-flow decision (flow_vote) */
    uint32_t *n_votes;    /* per worker: votes taken this run */
    bool *timing;         /* per worker: this run counts in op_s (run_block) */
    double *waited;       /* per worker: seconds the running op waited for the core gate */
    double *started;      /* per worker: when it left the current run's starting barrier */
} shared;

typedef struct worker {
    shared *sh;
    uint32_t dev;
} worker;

static void **wbufs(shared *sh, uint32_t dev)
{
    return &sh->bufs[(size_t)dev * 2u * sh->p->m->n_values];
}

/* dst[di] += src[si] in element type e: integers wrap around in their
 * width (added as unsigned bits: a sum through doubles loses low bits past
 * 2^53 and converting an out-of-range double back is undefined), floats
 * through double, which for two f32 values rounds once, as an f32 add. */
/* The wrap-around add of add_elem for an unsigned type T of the width. */
#define ADD_BITS(T)                                                                                \
    do {                                                                                           \
        T a_, b_;                                                                                  \
        memcpy(&a_, (const char *)dst + di * sizeof(T), sizeof(T));                                \
        memcpy(&b_, (const char *)src + si * sizeof(T), sizeof(T));                                \
        a_ = (T)(a_ + b_);                                                                         \
        memcpy((char *)dst + di * sizeof(T), &a_, sizeof(T));                                     \
    } while (0)

static void add_elem(void *dst, size_t di, const void *src, size_t si, sp_elem e)
{
    switch (e) {
    case SP_ELEM_I8:
    case SP_ELEM_UI8:
        ADD_BITS(uint8_t);
        return;
    case SP_ELEM_I16:
    case SP_ELEM_UI16:
        ADD_BITS(uint16_t);
        return;
    case SP_ELEM_I32:
    case SP_ELEM_UI32:
        ADD_BITS(uint32_t);
        return;
    case SP_ELEM_I64:
    case SP_ELEM_UI64:
        ADD_BITS(uint64_t);
        return;
    default:
        st(dst, e, di, ld(dst, e, di) + ld(src, e, si));
        return;
    }
}

/* Copies a box of extent ext from src (dims sd, starting at so) into dst
 * (dims dd, starting at do_); accumulate adds instead (add_elem). */
static void copy_box(const void *src, const int64_t *sd, const int64_t *so, void *dst,
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
            add_elem(dst, 0, src, 0, e);
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
                add_elem(dst, di + (size_t)i, src, si + (size_t)i, e);
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
 * previous iteration (release): reusing it saves the page faults and unmaps
 * of large fresh buffers, which cost more than the copies of a collective. */
static void *alloc_buffer(const prog *p, void **bufs, uint32_t v, bool zero)
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

static void *alloc_value(const prog *p, void **bufs, uint32_t v)
{
    return alloc_buffer(p, bufs, v, true);
}

/* True when device dev's block of v has no padding: a collective that copies
 * the group's blocks then writes every element of it, so a reused buffer
 * need not be zeroed first. */
static bool unpadded(const prog *p, uint32_t v, uint32_t dev)
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
static void release(const prog *p, void **bufs, uint32_t v, bool keep)
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
static cm_status local_error(const prog *p, const xop *x, cm_error *err, const char *what)
{
    return op_error(p, x->op, err, "%s: %s", p->m->ops[x->op].name, what);
}

static cm_status run_dot(const prog *p, const xop *x, void **bufs, uint32_t r, cm_error *err)
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
            return local_error(p, x, err, "batch shards of the operands differ");
        }
        B *= L->ldims[x->a[i]];
    }
    for (uint32_t i = 0; i < x->nc; i++) {
        if (L->ldims[x->c[i]] != R->ldims[x->d[i]]) {
            return local_error(p, x, err, "contracting shards of the operands differ");
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
        return local_error(p, x, err, "local shapes of operands and result disagree");
    }
    /* Straight on the operands when their layout allows (ex_kern_dot); every
     * element of the result is written. */
    void *out = alloc_buffer(p, bufs, r, false);
    if (out == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    cm_status st_ =
        elem_float(O->elem)
            ? ex_kern_dot(O->elem, bufs[lv], L->ldims, L->rank, bufs[rv], R->ldims, R->rank, x->a,
                          x->b, x->na, x->c, x->d, x->nc, out)
            : ex_kern_dot_int(L->elem, bufs[lv], L->ldims, L->rank, R->elem, bufs[rv], R->ldims,
                              R->rank, x->a, x->b, x->na, x->c, x->d, x->nc, O->elem, out);
    if (st_ != CM_OK) {
        cm_free(out);
        return st_ == CM_ENOMEM ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory")
                                : local_error(p, x, err, "no kernel for this element type");
    }
    bufs[r] = out;
    return CM_OK;
}

static cm_status run_reduce(const prog *p, const xop *x, void **bufs, uint32_t r, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t in = o->operands[0], init = o->operands[1];
    const vinfo *I = &p->vi[in], *O = &p->vi[r];
    bool red[EX_MAX_RANK] = {false};
    for (uint32_t i = 0; i < x->na; i++) {
        if (x->a[i] < 0 || x->a[i] >= (int64_t)I->rank) {
            return local_error(p, x, err, "bad reduce dimension");
        }
        red[x->a[i]] = true;
    }
    uint32_t j = 0;
    for (uint32_t k = 0; k < I->rank; k++) {
        if (!red[k] && (j >= O->rank || O->ldims[j++] != I->ldims[k])) {
            return local_error(p, x, err, "local shapes of operand and result disagree");
        }
    }
    if (O->elem == I->elem && p->vi[init].elem == I->elem) {
        /* A native loop for the type and body (ex_kern_reduce), else the
         * generic one below. */
        void *kout = alloc_buffer(p, bufs, r, false);
        if (kout == NULL) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        }
        cm_status kst =
            ex_kern_reduce(x->fn, I->elem, bufs[in], I->ldims, I->rank, red, bufs[init], kout);
        if (kst == CM_OK) {
            bufs[r] = kout;
            return CM_OK;
        }
        cm_free(kout);
        if (kst == CM_ENOMEM) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        }
    }
    double *acc = cm_alloc(sizeof(double) * (O->lcount + 1u));
    void *out = alloc_value(p, bufs, r);
    if (acc == NULL || out == NULL) {
        cm_free(acc);
        cm_free(out);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    double iv = ld(bufs[init], p->vi[init].elem, 0);
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
            acc[oi] = reduce_fn(x->fn, acc[oi], ld(bufs[in], I->elem, i));
            i++;
        } while (next_coord(c, I->ldims, I->rank));
    }
    for (size_t i = 0; i < O->lcount; i++) {
        st(out, O->elem, i, acc[i]);
    }
    cm_free(acc);
    bufs[r] = out;
    return CM_OK;
}

/* ---- collectives ----------------------------------------------------------------
 * A collective is cut into work items, and every worker takes items from one
 * shared counter between the collective's two barriers (coll_run), whatever
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
        s->wide = !unpadded(p, v, d) || !unpadded(p, r, d);
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
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
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
            copy_box(wbufs(sh, sd)[v], I->ldims, sfrom, t, tdims, tfrom, ext, O->rank, O->elem,
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
    if (O->elem == SP_ELEM_F32 && x->gsize <= COLL_MAX_FAST) {
        const float *in[COLL_MAX_FAST];
        float *out[COLL_MAX_FAST];
        for (uint32_t j = 0; j < x->gsize; j++) {
            in[j] = (const float *)wbufs(sh, (uint32_t)grp[j])[v] + b;
            out[j] = (float *)wbufs(sh, (uint32_t)grp[j])[r] + b;
        }
        ex_mem_sum_f32(out, x->gsize, in, x->gsize, e - b, stream);
        return;
    }
    /* Other types (and larger groups): a block of the sum in the element
     * type itself, added in group order (add_elem: integers wrap). */
    enum { BLOCK = 2048 }; /* elements of up to 8 bytes: 16 KiB, stays in L1 */
    uint64_t words[BLOCK];
    char *acc = (char *)words;
    for (size_t c = b; c < e; c += BLOCK) {
        size_t n = e - c < BLOCK ? e - c : BLOCK;
        memcpy(acc, (const char *)wbufs(sh, (uint32_t)grp[0])[v] + c * O->esz, n * O->esz);
        for (uint32_t j = 1; j < x->gsize; j++) {
            const void *src = wbufs(sh, (uint32_t)grp[j])[v];
            for (size_t i = 0; i < n; i++) {
                add_elem(acc, i, src, c + i, O->elem);
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
        if (!unpadded(p, v, d) || !unpadded(p, r, d)) {
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
static cm_status coll_run(const prog *p, const xop *x, shared *sh, uint32_t me, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *O = &p->vi[r];
    bool stream = O->lcount * O->esz * p->n_dev >= COLL_STREAM;
    cm_status st_ = CM_OK;
    size_t i;
    if (x->kind == SP_OP_SDY_ALL_REDUCE) {
        if (p->vi[v].lcount != O->lcount) {
            return local_error(p, x, err, "operand and result shards differ");
        }
        size_t ng = 0;
        for (uint32_t d = 0; d < p->n_dev; d++) {
            ng = (size_t)x->grp_of[d] + 1u > ng ? (size_t)x->grp_of[d] + 1u : ng;
        }
        size_t chunk = COLL_ITEM / O->esz;
        size_t n_items = ng * ((O->lcount + chunk - 1u) / chunk);
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < n_items) {
            size_t b = (i / ng) * chunk;
            all_reduce_item(p, x, sh, v, r, i % ng, b, b + chunk < O->lcount ? b + chunk : O->lcount,
                            stream);
        }
        ex_mem_fence();
        return CM_OK;
    }
    bool reduce = x->kind == SP_OP_SDY_REDUCE_SCATTER;
    cut c;
    int64_t lo[EX_MAX_RANK], hi[EX_MAX_RANK];
    size_t start = 0, count = 1;
    if (scatters(p, x, v, r)) {
        /* Items of 512 KiB, round-robin over the sources: 128 KiB items
         * taken source after source made the benchmark's all-to-all 1.25x
         * slower (24-26 against 19.5-20 ms); 32 KiB items 1.8x. */
        cut_block(&p->vi[v], COLL_SCATTER, &c);
        size_t n_items = c.n_items * p->n_dev;
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < n_items) {
            uint32_t sd = (uint32_t)(i % p->n_dev);
            item_region(&p->vi[v], &c, i / p->n_dev, lo, hi, &start, &count);
            scatter_item(p, x, sh, v, r, sd, &c, lo, hi, stream);
        }
        ex_mem_fence();
        return CM_OK;
    }
    if (fans(p, x, v, r)) {
        /* Items of COLL_ITEM bytes of a source, round-robin over the
         * sources. */
        cut_block(&p->vi[v], COLL_ITEM, &c);
        size_t n_items = c.n_items * p->n_dev;
        while ((i = atomic_fetch_add(&sh->next_item, 1)) < n_items) {
            uint32_t sd = (uint32_t)(i % p->n_dev);
            item_region(&p->vi[v], &c, i / p->n_dev, lo, hi, &start, &count);
            fan_item(p, x, sh, v, r, sd, lo, hi, stream);
        }
        ex_mem_fence();
        return CM_OK;
    }
    cut_block(O, COLL_ITEM, &c);
    size_t n_items = c.n_items * p->n_dev;
    while (st_ == CM_OK && (i = atomic_fetch_add(&sh->next_item, 1)) < n_items) {
        uint32_t dev = (uint32_t)(i % p->n_dev);
        item_region(O, &c, i / p->n_dev, lo, hi, &start, &count);
        st_ = redistribute_item(p, x, sh, me, dev, lo, hi, start, count, reduce, stream, err);
    }
    ex_mem_fence();
    return st_;
}

static bool is_collective(sp_op_kind k)
{
    return k == SP_OP_SDY_ALL_REDUCE || k == SP_OP_SDY_ALL_GATHER || k == SP_OP_SDY_ALL_SLICE ||
           k == SP_OP_SDY_ALL_TO_ALL || k == SP_OP_SDY_REDUCE_SCATTER ||
           k == SP_OP_SDY_COLLECTIVE_PERMUTE || k == SP_OP_SDY_RESHARD ||
           k == SP_OP_SDY_SHARDING_CONSTRAINT;
}

/* ---- ops with a kernel in ex_kern.c: running ---------------------------------------- */

static ex_block block_of(const prog *p, uint32_t dev, uint32_t v, void *data)
{
    const vinfo *vi = &p->vi[v];
    ex_block b = {data, vi->elem, vi->rank, vi->esz, vi->ldims, vi->gdims, voff(p, v, dev)};
    return b;
}

/* A scalar index operand as int64 (saturating). */
static int64_t scalar_index(const prog *p, void **bufs, uint32_t v)
{
    double d = ld(bufs[v], p->vi[v].elem, 0);
    return d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
}

/* Whether global positions [a, b) of dimension k are in v's block on dev
 * (or the range is empty). */
static bool holds(const prog *p, uint32_t v, uint32_t dev, uint32_t k, int64_t a, int64_t b)
{
    const vinfo *vi = &p->vi[v];
    int64_t off = voff(p, v, dev)[k];
    return b <= a || (a >= off && b <= off + valid_len(vi, k, off));
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
                return local_error(p, x, err, not_local);
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
                return local_error(p, x, err, not_local);
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
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
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
                return local_error(p, x, err, not_local);
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
            return local_error(p, x, err,
                               "the indices block does not line up with the result "
                               "block (this sharding cannot be executed yet)");
        }
        return CM_OK;
    }
    case SP_OP_SCATTER: {
        if (copy_view(p, bufs, dev, v, r, out) != CM_OK) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        }
        ex_block ixb = block_of(p, dev, o->operands[1], bufs[o->operands[1]]);
        ex_block ub = block_of(p, dev, o->operands[2], bufs[o->operands[2]]);
        if (ex_kern_scatter(x->ext, x->fn, &ixb, &ub, &ob) != CM_OK) {
            return local_error(p, x, err,
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
                return local_error(p, x, err, not_local);
            }
        }
        if (ex_kern_select_scatter(O->elem,
                                   x->dim == CMP_GE   ? EX_CMP_GE
                                   : x->dim == CMP_GT ? EX_CMP_GT
                                   : x->dim == CMP_LE ? EX_CMP_LE
                                                      : EX_CMP_LT,
                                   x->nd == 1, x->fn, bufs[v], I->ldims, I->rank, bufs[sv],
                                   S->ldims, x->a, x->b, lo, bufs[o->operands[2]], out) != CM_OK) {
            return local_error(p, x, err, "no kernel for this element type and body");
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
                return local_error(p, x, err, not_local);
            }
        }
        if (ex_kern_reduce_window(x->fn, O->elem, bufs[v], I->ldims, I->rank, x->a, x->b, lo,
                                  bufs[o->operands[1]], out, O->ldims) != CM_OK) {
            return local_error(p, x, err, "no kernel for this element type and body");
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
            return local_error(p, x, err,
                               "a convolution sharded on a spatial dimension (or with groups, "
                               "not in whole groups) cannot be executed yet");
        }
        cm_status st_ = ex_kern_conv(O->elem, &cd, bufs[v], I->ldims, bufs[kv], K->ldims, out,
                                     O->ldims, O->rank);
        if (st_ != CM_OK) {
            return st_ == CM_ENOMEM ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory")
                                    : local_error(p, x, err, "no kernel for this element type");
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
            return local_error(p, x, err,
                               "a sort sharded along its sort dimension cannot be executed "
                               "(the partitioner must gather that dimension first)");
        }
        for (uint32_t k = 0; k < O->rank; k++) {
            int64_t a = roff[k], b = roff[k] + valid_len(O, k, roff[k]);
            if (R->ldims[k] != O->ldims[k] || voff(p, r0 + j, dev)[k] != a ||
                !holds(p, o->operands[j], dev, k, a, b)) {
                return local_error(p, x, err, not_local);
            }
        }
    }
    const void **in = cm_calloc(n, sizeof *in);
    void **out = cm_calloc(n, sizeof *out), **tmp = cm_calloc(n, sizeof *tmp);
    sp_elem *el = cm_calloc(n, sizeof *el);
    cm_status st_ = in == NULL || out == NULL || tmp == NULL || el == NULL ? CM_ENOMEM : CM_OK;
    for (uint32_t j = 0; st_ == CM_OK && j < n; j++) {
        el[j] = p->vi[r0 + j].elem;
        in[j] = view_as(p, bufs, dev, o->operands[j], r0 + j, &tmp[j]);
        out[j] = alloc_buffer(p, bufs, r0 + j, false);
        st_ = in[j] == NULL || out[j] == NULL ? CM_ENOMEM : CM_OK;
    }
    if (st_ == CM_OK) {
        st_ = ex_kern_sort(n, el, in, out, O->ldims, O->rank, dim, x->ext, (uint32_t)x->fn);
    }
    for (uint32_t j = 0; out != NULL && j < n; j++) {
        if (st_ == CM_OK) {
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
    if (st_ == CM_ENOMEM) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    return st_ == CM_OK ? CM_OK : local_error(p, x, err, "no kernel for these element types");
}

/* Runs one non-collective op on device dev. */
static cm_status compute_op(const prog *p, const xop *x, void **bufs, uint32_t dev, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t r = o->first_result;
    const vinfo *O = &p->vi[r];
    void *tmp[3] = {NULL, NULL, NULL};
    void *out = NULL;
    cm_status st_ = CM_OK;
    switch (x->kind) {
    case SP_OP_DOT_GENERAL:
        return run_dot(p, x, bufs, r, err);
    case SP_OP_REDUCE:
        return run_reduce(p, x, bufs, r, err);
    case SP_OP_SORT:
        return run_sort(p, x, bufs, dev, err);
    default:
        break;
    }
    if (x->kind == SP_OP_RESHAPE) {
        /* A reshape of a value used for the last time takes its buffer
         * (same bytes) instead of copying it; the spare buffers follow, so
         * the next iteration allocates nothing either (alloc_buffer). */
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
    out = alloc_buffer(p, bufs, r, false);
    if (out == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
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
    case SP_OP_XOR: {
        const void *a = view_as(p, bufs, dev, o->operands[0], r, &tmp[0]);
        const void *b = view_as(p, bufs, dev, o->operands[1], r, &tmp[1]);
        if (a == NULL || b == NULL) {
            st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
            break;
        }
        elem_job j = {.what = EK_BINARY, .k = x->kind, .oe = O->elem, .a = a, .b = b,
                      .out = out, .sa = O->esz, .sb = O->esz, .so = O->esz, .n = O->lcount};
        if (run_elem(p, dev, &j)) {
            break;
        }
        if (x->kind == SP_OP_AND || x->kind == SP_OP_OR || x->kind == SP_OP_XOR) {
            st_ = local_error(p, x, err, "no kernel for this element type");
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
            st(out, O->elem, i, binary(x->kind, ld(a, O->elem, i), ld(b, O->elem, i), is_int));
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
    case SP_OP_CONVERT: {
        uint32_t v = o->operands[0];
        const void *a = view_as(p, bufs, dev, v, r, &tmp[0]);
        if (a == NULL) {
            st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
            break;
        }
        sp_elem ie = p->vi[v].elem;
        elem_job j = {.what = x->kind == SP_OP_CONVERT ? EK_CONVERT : EK_UNARY, .k = x->kind,
                      .ie = ie, .oe = O->elem, .a = a, .out = out, .sa = p->vi[v].esz,
                      .so = O->esz, .n = O->lcount};
        if (run_elem(p, dev, &j)) {
            break;
        }
        if (x->kind == SP_OP_NOT) {
            st_ = local_error(p, x, err, "no kernel for this element type");
            break;
        }
        for (size_t i = 0; i < O->lcount; i++) {
            st(out, O->elem, i, unary(x->kind, ld(a, ie, i)));
        }
        break;
    }
    case SP_OP_COMPARE: {
        uint32_t v0 = o->operands[0], v1 = o->operands[1];
        const void *a = view_as(p, bufs, dev, v0, r, &tmp[0]);
        const void *b = view_as(p, bufs, dev, v1, r, &tmp[1]);
        if (a == NULL || b == NULL) {
            st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
            break;
        }
        sp_elem ie = p->vi[v0].elem;
        if (O->elem == SP_ELEM_I1 && x->nd == 1) { /* TOTALORDER */
            if (!ex_kern_compare_total(x->fn, ie, a, b, out, O->lcount)) {
                st_ = local_error(p, x, err, "no kernel for this element type");
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
            double u = ld(a, ie, i), w = ld(b, ie, i);
            bool c = x->fn == CMP_EQ   ? u == w
                     : x->fn == CMP_NE ? u != w
                     : x->fn == CMP_LT ? u < w
                     : x->fn == CMP_LE ? u <= w
                     : x->fn == CMP_GT ? u > w
                                       : u >= w;
            st(out, O->elem, i, c ? 1 : 0);
        }
        break;
    }
    case SP_OP_SELECT: {
        uint32_t pv = o->operands[0];
        const void *pr = view_as(p, bufs, dev, pv, r, &tmp[0]);
        const void *a = view_as(p, bufs, dev, o->operands[1], r, &tmp[1]);
        const void *b = view_as(p, bufs, dev, o->operands[2], r, &tmp[2]);
        if (pr == NULL || a == NULL || b == NULL) {
            st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
            break;
        }
        elem_job j = {.what = EK_SELECT, .a = pr, .b = a, .c = b, .out = out,
                      .sa = p->vi[pv].rank == 0 ? 0 : p->vi[pv].esz, .sb = O->esz, .sc = O->esz,
                      .so = O->esz, .n = O->lcount};
        (void)run_elem(p, dev, &j);
        break;
    }
    case SP_OP_CONSTANT: {
        if (x->n_cval == 1) {
            uint64_t one = 0;
            st(&one, O->elem, 0, x->cval[0]);
            ex_kern_fill(out, O->lcount, &one, O->esz);
            break;
        }
        amap map[EX_MAX_RANK];
        const int64_t *off = voff(p, r, dev);
        for (uint32_t k = 0; k < O->rank; k++) {
            map[k] = (amap){(int32_t)k, 1, off[k]};
        }
        if (O->elem == SP_ELEM_F64) {
            gather_affine(pool_of(p, dev), x->cval, O->gdims, O->rank, map, out, O->ldims, O->rank,
                          sizeof(double));
        } else {
            /* the values are doubles: gather, then convert */
            double *d = cm_alloc(sizeof(double) * (O->lcount + 1u));
            if (d == NULL) {
                st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
                break;
            }
            gather_affine(pool_of(p, dev), x->cval, O->gdims, O->rank, map, d, O->ldims, O->rank,
                          sizeof(double));
            for (size_t i = 0; i < O->lcount; i++) {
                st(out, O->elem, i, d[i]);
            }
            cm_free(d);
        }
        break;
    }
    case SP_OP_IOTA: {
        if (x->dim < 0 || x->dim >= (int64_t)O->rank) {
            st_ = local_error(p, x, err, "bad iota dimension");
            break;
        }
        int64_t off = voff(p, r, dev)[x->dim];
        if (O->lcount == 0) {
            break;
        }
        int64_t c[EX_MAX_RANK] = {0};
        size_t i = 0;
        do {
            st(out, O->elem, i++, (double)(off + c[x->dim]));
        } while (next_coord(c, O->ldims, O->rank));
        break;
    }
    case SP_OP_BROADCAST_IN_DIM: {
        uint32_t v = o->operands[0];
        const vinfo *I = &p->vi[v];
        if (x->na != I->rank) {
            st_ = local_error(p, x, err, "broadcast_dimensions do not match the operand");
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
            st_ = local_error(p, x, err, "slice attributes do not match the operand");
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
        if (p->vi[v].lcount != O->lcount) {
            st_ = local_error(p, x, err, "local shards of operand and result differ in size");
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
        st_ = run_kern_op(p, x, bufs, dev, out, err);
        break;
    case SP_OP_CONCATENATE: {
        int64_t at = 0, zero[EX_MAX_RANK] = {0}, dst[EX_MAX_RANK] = {0};
        if (x->dim < 0 || x->dim >= (int64_t)O->rank) {
            st_ = local_error(p, x, err, "bad concatenate dimension");
            break;
        }
        for (uint32_t j = 0; j < o->n_operands && st_ == CM_OK; j++) {
            const vinfo *I = &p->vi[o->operands[j]];
            for (uint32_t k = 0; k < O->rank; k++) {
                if ((int64_t)k != x->dim && I->ldims[k] != O->ldims[k]) {
                    st_ = local_error(p, x, err, "operand shards do not line up");
                }
            }
            dst[x->dim] = at;
            if (st_ == CM_OK && at + I->ldims[x->dim] <= O->ldims[x->dim]) {
                copy_box(bufs[o->operands[j]], I->ldims, zero, out, O->ldims, dst, I->ldims,
                         O->rank, O->elem, O->esz, false);
            }
            at += I->ldims[x->dim];
        }
        if (st_ == CM_OK && at != O->ldims[x->dim]) {
            st_ = local_error(p, x, err, "operand shards do not add up to the result");
        }
        break;
    }
    default:
        st_ = op_error(p, x->op, err, "op %s cannot be executed yet", p->m->ops[x->op].name);
        break;
    }
    for (int i = 0; i < 3; i++) {
        cm_free(tmp[i]);
    }
    if (st_ != CM_OK) {
        cm_free(out);
        return st_;
    }
    bufs[r] = out;
    return CM_OK;
}

/* Runs one non-collective op on device dev, holding the core gate (more
 * workers than cores: only as many compute at once as there are cores). */
static cm_status run_local(const prog *p, const xop *x, void **bufs, uint32_t dev, cm_error *err,
                           double *waited)
{
    ex_gate *g = p->gate == NULL ? NULL : &p->gate[dev % p->n_gates];
    double t0 = waited != NULL && g != NULL ? cm_now() : 0;
    ex_gate_enter(g);
    if (waited != NULL && g != NULL) {
        *waited += cm_now() - t0; /* not the op's own time (per-op timers) */
    }
    cm_status st_ = compute_op(p, x, bufs, dev, err);
    ex_gate_leave(g);
    return st_;
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
            release(p, bufs, v, keep);
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
            release(p, bufs, x->dead[j], keep);
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
    int64_t *slot = &sh->votes[(size_t)(sh->n_votes[dev]++ & 1u) * n];
    slot[dev] = mine;
    pthread_barrier_wait(&sh->bar);
    int64_t agreed = slot[0];
    for (uint32_t d = 0; d < n; d++) {
        if (slot[d] == FLOW_FAILED) {
            return FLOW_FAILED;
        }
        if (slot[d] != agreed) {
            agreed = FLOW_DISAGREE;
        }
    }
    return agreed;
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
    copy_box(src, S->ldims, sf, dst, D->ldims, df, ext, D->rank, D->elem, D->esz, false);
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
    cm_status st_ = CM_OK;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = src[i], d = dst + i;
        if (at == NULL) {
            bufs[d] = NULL; /* a borrowed argument (flow_call cleared it) */
        } else if (bufs[d] != NULL) {
            release(p, bufs, d, keep);
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
        bufs[d] = alloc_buffer(p, bufs, d, false);
        if (bufs[d] == NULL) {
            st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
            atomic_store(&sh->failed, 1);
            failed = true;
            continue;
        }
        memcpy(bufs[d], bufs[s], p->vi[d].lcount * p->vi[d].esz);
    }
    if (!moves) {
        return st_;
    }
    for (uint32_t i = 0; !failed && i < n; i++) {
        if (!same_layout(p, src[i], dst + i)) {
            bufs[dst + i] = alloc_buffer(p, bufs, dst + i, true);
            if (bufs[dst + i] == NULL) {
                st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
                atomic_store(&sh->failed, 1);
                failed = true;
            }
        }
    }
    pthread_barrier_wait(&sh->bar);
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
    return st_;
}

/* The failure of a vote, reported on device dev against op x. */
static cm_status flow_disagree(shared *sh, uint32_t dev, const xop *x, const char *what)
{
    atomic_store(&sh->failed, 1);
    return op_error(sh->p, x->op, &sh->errs[dev],
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
    cm_status st_ = flow_pass(sh, dev, x, o->operands, res, n, keep, err);
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
            st_ = flow_disagree(sh, dev, x, "the loop predicate");
        }
        if (go != 1) {
            break;
        }
        for (uint32_t j = 0; j < n; j++) {
            if (bufs[bb->first_arg + j] != NULL) {
                release(p, bufs, bb->first_arg + j, true);
            }
            bufs[bb->first_arg + j] = bufs[res + j];
            bufs[res + j] = NULL;
        }
        run_block(sh, dev, x->sub[1], true);
        cm_status s2 = flow_pass(sh, dev, bret, m->ops[bret->op].operands, res, n, true, err);
        st_ = st_ == CM_OK ? s2 : st_;
        release_dead(p, bufs, bret, true);
    }
    return st_;
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
    cm_status st_ = flow_pass(sh, dev, ret, p->m->ops[ret->op].operands, o->first_result,
                              o->n_results, keep, &sh->errs[dev]);
    release_dead(p, bufs, ret, keep);
    return st_;
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
    cm_status st_ = flow_pass(sh, dev, NULL, o->operands, b->first_arg, b->n_args, keep,
                              &sh->errs[dev]);
    run_block(sh, dev, x->sub[0], keep);
    cm_status s2 = flow_pass(sh, dev, ret, p->m->ops[ret->op].operands, o->first_result,
                             o->n_results, keep, &sh->errs[dev]);
    release_dead(p, bufs, ret, keep);
    for (uint32_t i = 0; i < b->n_args; i++) {
        uint32_t a = b->first_arg + i;
        if (bufs[a] != NULL && !same_layout(p, o->operands[i], a)) {
            release(p, bufs, a, keep);
        }
        bufs[a] = NULL;
    }
    return st_ == CM_OK ? s2 : st_;
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
            release(p, bufs, first + i, true);
        }
        bufs[first + i] = alloc_buffer(p, bufs, first + i, true);
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
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        }
        return CM_OK;
    }
    if (atomic_load(&sh->failed) == 0 && !manual_alloc(sh, dev, x, true)) {
        ok = false;
        atomic_store(&sh->failed, 1);
    }
    pthread_barrier_wait(&sh->bar);
    for (uint32_t i = 0; atomic_load(&sh->failed) == 0 && i < o->n_operands; i++) {
        uint32_t v = o->operands[i];
        const int64_t *at = &mc->in_off[i][(size_t)dev * p->vi[v].rank];
        for (uint32_t s = 0; s < p->n_dev; s++) {
            copy_overlap(p, wbufs(sh, s)[v], v, voff(p, v, s), bufs[arg0 + i], arg0 + i, at,
                         p->vi[v].gdims);
        }
    }
    run_block(sh, dev, x->sub[0], keep);
    if (atomic_load(&sh->failed) == 0 && !manual_alloc(sh, dev, x, false)) {
        ok = false;
        atomic_store(&sh->failed, 1);
    }
    pthread_barrier_wait(&sh->bar);
    for (uint32_t j = 0; atomic_load(&sh->failed) == 0 && j < o->n_results; j++) {
        uint32_t r = o->first_result + j;
        for (uint32_t s = 0; s < p->n_dev; s++) {
            if (mc->first[s]) {
                copy_overlap(p, wbufs(sh, s)[outs[j]], outs[j],
                             &mc->out_off[j][(size_t)s * p->vi[r].rank], bufs[r], r,
                             voff(p, r, dev), p->vi[r].gdims);
            }
        }
    }
    pthread_barrier_wait(&sh->bar);
    release_dead(p, bufs, ret, keep);
    return ok ? CM_OK : cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
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
    cm_status st_ = CM_OK;
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
    if (is_collective(x->kind) && !p->replicated && !x->local) {
        if (!failed) {
            /* Any worker writes any device's result (coll_run). Sums
             * and unpadded copies write every element of it. */
            uint32_t r = o->first_result;
            bool zero = x->kind != SP_OP_SDY_ALL_REDUCE && x->kind != SP_OP_SDY_REDUCE_SCATTER &&
                        !unpadded(p, r, dev);
            bufs[r] = alloc_buffer(p, bufs, r, zero);
            if (bufs[r] == NULL) {
                st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
                atomic_store(&sh->failed, 1);
            }
        }
        if (dev == 0) {
            /* Every worker is past the previous collective's last
             * barrier, so nobody takes items from the counter now. */
            atomic_store(&sh->next_item, 0);
        }
        pthread_barrier_wait(&sh->bar);
        if (atomic_load(&sh->failed) == 0) {
            st_ = coll_run(p, x, sh, dev, err);
        }
        pthread_barrier_wait(&sh->bar);
    } else if (is_collective(x->kind)) {
        if (!failed) {
            uint32_t v = o->operands[0], r = o->first_result;
            void *out = alloc_value(p, bufs, r);
            if (out == NULL) {
                st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
            } else {
                memcpy(out, bufs[v], p->vi[r].lcount * p->vi[r].esz);
                bufs[r] = out;
            }
        }
    } else if (!failed) {
        st_ = run_local(p, x, bufs, dev, err, sh->timing[dev] ? &sh->waited[dev] : NULL);
    }
    return st_;
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
        double t0 = op_s != NULL && x->n_sub == 0 ? cm_now() : 0;
        sh->waited[dev] = 0;
        if (run_op(sh, dev, x, keep) != CM_OK) {
            atomic_store(&sh->failed, 1);
        }
        if (op_s != NULL && x->n_sub == 0) {
            /* Waiting for a core (more workers than cores) is not the op's. */
            op_s[x->op] += cm_now() - t0 - sh->waited[dev];
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

static void *worker_main(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    for (uint32_t it = 0; it < sh->iters; it++) {
        if (it > 0) {
            free_all(sh, w->dev, true);
        }
        pthread_barrier_wait(&sh->bar);
        sh->started[w->dev] = cm_now();
        run_once(sh, w->dev, it + 1 < sh->iters, sh->op_s != NULL && it >= sh->op_from);
        pthread_barrier_wait(&sh->bar);
        if (w->dev == 0 && sh->iter_s != NULL) {
            /* From the first device to leave the starting barrier: with
             * more workers than cores, device 0 may be woken well after
             * others have begun (every device's start is written before
             * the closing barrier, and none is written again before the
             * next starting one, which waits for device 0). */
            double t0 = sh->started[0];
            for (uint32_t d = 1; d < sh->p->n_dev; d++) {
                t0 = sh->started[d] < t0 ? sh->started[d] : t0;
            }
            sh->iter_s[it] = cm_now() - t0;
        }
        if (w->dev == 0 && sh->between != NULL && it + 1 < sh->iters) {
            sh->between(sh->between_ctx); /* the others wait at the next barrier */
        }
    }
    return NULL;
}
static void coords_text(const ex_tensor *t, size_t idx, char *buf, size_t len);

/* ---- running ------------------------------------------------------------------ */

/* Takes device dev's block of a global tensor (zero padding). */
static void *take_block(const prog *p, uint32_t v, uint32_t dev, const void *global)
{
    const vinfo *vi = &p->vi[v];
    void *out = alloc_value(p, NULL, v);
    if (out == NULL) {
        return NULL;
    }
    const int64_t *off = voff(p, v, dev);
    int64_t ext[EX_MAX_RANK], zero[EX_MAX_RANK] = {0};
    for (uint32_t k = 0; k < vi->rank; k++) {
        ext[k] = valid_len(vi, k, off[k]);
    }
    copy_box(global, vi->gdims, off, out, vi->ldims, zero, ext, vi->rank, vi->elem, vi->esz,
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
    *res_out = NULL;
    *n_res_out = 0;
    uint32_t n_dev = o->replicated ? 1 : (o->n_devices > 0 ? o->n_devices : ex_module_devices(m));
    uint32_t iters = o->iters > 0 ? o->iters : 1;
    if (n_dev > 4096) {
        return cm_error_set(err, CM_EINVAL, NULL, "too many devices (%u)", n_dev);
    }
    prog p;
    cm_status st_ = prog_init(&p, m, n_dev, o->replicated, err);
    if (st_ != CM_OK) {
        prog_fini(&p);
        return st_;
    }
    const sp_block *b = &m->blocks[p.block];
    if (n_args != b->n_args) {
        prog_fini(&p);
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
            prog_fini(&p);
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
    sh.between = between;
    sh.between_ctx = ctx;
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
    pthread_t *th = cm_calloc(n_dev, sizeof(pthread_t));
    bool ok = sh.bufs != NULL && sh.argbufs != NULL && sh.errs != NULL && sh.scratch != NULL &&
              sh.votes != NULL && sh.n_votes != NULL && sh.timing != NULL && sh.waited != NULL &&
              sh.started != NULL && ws != NULL && th != NULL;
    for (uint32_t d = 0; ok && d < n_dev; d++) {
        for (uint32_t i = 0; ok && i < n_args; i++) {
            void *a = take_block(&p, b->first_arg + i, d, args[i].data);
            sh.argbufs[(size_t)d * n_args + i] = a;
            ok = a != NULL;
        }
    }
    if (!ok) {
        st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* OpenBLAS threads: the cores shared out over the workers (one device:
     * every core in its sgemm); with more workers than cores, the gate lets
     * only as many compute at a time (ex_gate). */
    uint32_t cores = ex_kern_cores(), n_cpu = 0;
    size_t cpus[EX_MAX_PINNED];
    bool pin = pinned_cpus(o->affinity, n_dev, cpus, &n_cpu);
    if (pin) {
        cores = n_cpu; /* a cgroup or taskset may allow fewer than are online */
    }
    ex_blas_set_threads((int)(n_dev < cores ? cores / n_dev : 1u));
    /* One gate for all the cores, or one per pinned CPU for its workers. */
    uint32_t n_gates = pin && n_dev > cores ? cores : 1u;
    ex_gate gates[EX_MAX_PINNED];
    for (uint32_t g = 0; g < n_gates; g++) {
        ex_gate_init(&gates[g], n_gates > 1 ? 1u : (n_dev > cores ? cores : 0u));
    }
    p.gate = gates;
    p.n_gates = n_gates;
    /* With fewer workers than cores, each worker spreads its element-wise
     * loops over its share of them (ex_par); a pool that cannot start
     * leaves that worker on one thread. */
    uint32_t helpers = n_dev < cores ? cores / n_dev - 1u : 0u;
    if (helpers >= EX_PAR_MAX) {
        helpers = EX_PAR_MAX - 1u;
    }
    p.par = helpers > 0 ? cm_calloc(n_dev, sizeof(ex_par *)) : NULL;
    for (uint32_t d = 0; p.par != NULL && d < n_dev; d++) {
        (void)ex_par_start(helpers, &p.par[d]);
    }
    pthread_barrier_init(&sh.bar, NULL, n_dev);
    uint32_t started = 0;
    for (uint32_t d = 0; d < n_dev; d++) {
        ws[d].sh = &sh;
        ws[d].dev = d;
        pthread_attr_t attr;
        if (pthread_attr_init(&attr) != 0) {
            break;
        }
        if (pin) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[d % n_cpu], &one);
            if (pthread_attr_setaffinity_np(&attr, sizeof one, &one) != 0) {
                pthread_attr_destroy(&attr);
                break;
            }
        }
        int rc = pthread_create(&th[d], &attr, worker_main, &ws[d]);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            break;
        }
        started++;
    }
    if (started < n_dev) {
        /* The started workers wait at the first barrier forever; this only
         * happens when the system is out of threads or refuses a CPU the
         * process was allowed a moment ago, so fail loudly. */
        abort();
    }
    for (uint32_t d = 0; d < n_dev; d++) {
        pthread_join(th[d], NULL);
    }
    pthread_barrier_destroy(&sh.bar);
    p.gate = NULL;
    for (uint32_t g = 0; g < n_gates; g++) {
        ex_gate_fini(&gates[g]);
    }
    for (uint32_t d = 0; p.par != NULL && d < n_dev; d++) {
        ex_par_stop(p.par[d]);
    }
    cm_free(p.par);
    p.par = NULL;
    if (atomic_load(&sh.failed) != 0) {
        for (uint32_t d = 0; d < n_dev; d++) {
            if (sh.errs[d].code != CM_OK) {
                if (err != NULL && err->code == CM_OK) {
                    *err = sh.errs[d];
                }
                st_ = sh.errs[d].code;
                break;
            }
        }
        if (st_ == CM_OK) {
            st_ = cm_error_set(err, CM_EINTERNAL, NULL, "a worker failed");
        }
        goto out;
    }
    /* Assemble the results from every device's block. */
    const sp_op *ret = &m->ops[p.ret];
    ex_tensor *res = cm_calloc(ret->n_operands + 1u, sizeof(ex_tensor));
    if (res == NULL) {
        st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (uint32_t j = 0; j < ret->n_operands; j++) {
        uint32_t v = ret->operands[j];
        const vinfo *vi = &p.vi[v];
        res[j].elem = vi->elem;
        res[j].rank = vi->rank;
        memcpy(res[j].dims, vi->gdims, sizeof(int64_t) * vi->rank);
        res[j].n = count_of(vi->gdims, vi->rank);
        res[j].data = cm_calloc(res[j].n + 1u, vi->esz);
        if (res[j].data == NULL) {
            ex_tensors_free(res, ret->n_operands);
            st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
            goto out;
        }
        /* Devices holding the same element must agree bit for bit: a
         * collective that sent wrong data to one replica shows up here. */
        uint8_t *seen = cm_calloc(res[j].n + 1u, 1);
        if (seen == NULL) {
            ex_tensors_free(res, ret->n_operands);
            st_ = cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
            goto out;
        }
        for (uint32_t d = 0; d < n_dev && st_ == CM_OK; d++) {
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
                    coords_text(&res[j], gi, where, sizeof where);
                    st_ = cm_error_set(err, CM_EINTERNAL, NULL,
                                       "result %u: replicas disagree at %s (device %u)", j,
                                       where, d);
                    break;
                }
                memcpy(dst, src + si * vi->esz, vi->esz);
                seen[gi] = 1;
            } while (next_coord(c, ext, vi->rank));
        }
        cm_free(seen);
        if (st_ != CM_OK) {
            ex_tensors_free(res, ret->n_operands);
            goto out;
        }
    }
    *res_out = res;
    *n_res_out = ret->n_operands;
out:
    for (uint32_t d = 0; sh.bufs != NULL && d < n_dev; d++) {
        free_all(&sh, d, false);
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
    cm_free(th);
    prog_fini(&p);
    return st_;
}

/* ---- arguments, comparison ------------------------------------------------------ */

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

cm_status ex_args_make(const sp_module *m, uint64_t seed, ex_tensor **args_out, uint32_t *n_out,
                       cm_error *err)
{
    *args_out = NULL;
    *n_out = 0;
    uint32_t f = sp_module_func(m, "main");
    if (f == SP_NONE || m->ops[f].n_regions != 1 || m->ops[f].regions[0].n_blocks == 0) {
        return cm_error_set(err, CM_EINVAL, NULL, "the module has no function @main");
    }
    const sp_block *b = &m->blocks[m->ops[f].regions[0].blocks[0]];
    ex_tensor *t = cm_calloc(b->n_args + 1u, sizeof(ex_tensor));
    if (t == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    char at[32] = ""; /* errors point at @main ("LINE:COL" when it came from text) */
    if (m->ops[f].line > 0) {
        snprintf(at, sizeof at, "%u:%u", m->ops[f].line, m->ops[f].col);
    }
    for (uint32_t i = 0; i < b->n_args; i++) {
        const sp_type *ty = sp_value_type(m, b->first_arg + i);
        if (ty->kind != SP_TYPE_TENSOR || !elem_supported(ty->elem) || ty->rank > EX_MAX_RANK) {
            ex_tensors_free(t, b->n_args);
            return cm_error_set(err, CM_EINVAL, at, "argument %u: type %s cannot be executed yet",
                                i, ty->text);
        }
        size_t bytes = sp_elem_bytes(ty->elem);
        for (uint32_t k = 0; k < ty->rank; k++) {
            if (ty->dims[k] < 0) {
                ex_tensors_free(t, b->n_args);
                return cm_error_set(err, CM_EINVAL, at, "argument %u: dynamic shape", i);
            }
            if (!cm_mul_size(bytes, (size_t)ty->dims[k], &bytes) || bytes > (SIZE_MAX >> 2)) {
                ex_tensors_free(t, b->n_args);
                return cm_error_set(err, CM_EINVAL, at, "argument %u: type %s is too large", i,
                                    ty->text);
            }
        }
        t[i].elem = ty->elem;
        t[i].rank = ty->rank;
        memcpy(t[i].dims, ty->dims, sizeof(int64_t) * ty->rank);
        t[i].n = count_of(ty->dims, ty->rank);
        t[i].data = cm_calloc(t[i].n + 1u, sp_elem_bytes(ty->elem));
        if (t[i].data == NULL) {
            ex_tensors_free(t, b->n_args);
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        }
        uint64_t s = (seed ^ 0x9E3779B97F4A7C15ULL) + 0xBF58476D1CE4E5B9ULL * (i + 1u);
        if (s == 0) {
            s = 1;
        }
        double fan = ty->rank > 0 && ty->dims[0] > 0 ? (double)ty->dims[0] : 1.0;
        double scale = sqrt(3.0 / fan);
        for (size_t j = 0; j < t[i].n; j++) {
            uint64_t r = xorshift(&s);
            double u = (double)(r >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
            double v = elem_float(ty->elem) ? (2.0 * u - 1.0) * scale
                       : ty->elem == SP_ELEM_I1 ? (double)(r >> 63)
                                                : (double)(r >> 61);
            st(t[i].data, ty->elem, j, v);
        }
    }
    *args_out = t;
    *n_out = b->n_args;
    return CM_OK;
}

static void coords_text(const ex_tensor *t, size_t idx, char *buf, size_t len)
{
    int64_t c[EX_MAX_RANK];
    for (uint32_t k = t->rank; k-- > 0;) {
        c[k] = t->dims[k] > 0 ? (int64_t)(idx % (size_t)t->dims[k]) : 0;
        idx = t->dims[k] > 0 ? idx / (size_t)t->dims[k] : 0;
    }
    size_t at = 0;
    at += (size_t)snprintf(buf, len, "[");
    for (uint32_t k = 0; k < t->rank && at < len; k++) {
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", k > 0 ? ", " : "", (long long)c[k]);
    }
    if (at < len) {
        snprintf(buf + at, len - at, "]");
    }
}

void ex_tensors_compare(const ex_tensor *expected, const ex_tensor *got, uint32_t n, int64_t k,
                        ex_mismatch *out)
{
    memset(out, 0, sizeof *out);
    out->match = true;
    double sk = sqrt((double)(k > 1 ? k : 1));
    for (uint32_t r = 0; r < n; r++) {
        const ex_tensor *e = &expected[r], *g = &got[r];
        bool same = e->elem == g->elem && e->rank == g->rank && e->n == g->n;
        for (uint32_t d = 0; same && d < e->rank; d++) {
            same = e->dims[d] == g->dims[d];
        }
        if (!same) {
            if (out->match) {
                out->match = false;
                out->result = r;
                snprintf(out->where, sizeof out->where, "(shape or type differs)");
            }
            continue;
        }
        double rel = 0, abs_ = 0;
        if (e->elem == SP_ELEM_F32) {
            rel = 1e-4 * sk;
            abs_ = 1e-5 * sk;
        } else if (e->elem == SP_ELEM_F64) {
            rel = 1e-10 * sk;
            abs_ = 1e-12 * sk;
        }
        for (size_t i = 0; i < e->n; i++) {
            double a = ld(e->data, e->elem, i), b = ld(g->data, g->elem, i);
            double diff = fabs(a - b), tol = rel * fabs(a) + abs_;
            bool bad = isnan(a) != isnan(b) || diff > tol;
            if (isnan(a) && isnan(b)) {
                bad = false;
                diff = 0;
            }
            if (diff > out->max_abs_diff || (isnan(diff) && !isnan(out->max_abs_diff))) {
                out->max_abs_diff = diff;
            }
            if (bad && out->match) {
                out->match = false;
                out->result = r;
                out->index = i;
                out->expected = a;
                out->got = b;
                out->tol = tol;
                coords_text(e, i, out->where, sizeof out->where);
            }
        }
    }
}

int64_t ex_module_contraction(const sp_module *m)
{
    int64_t best = 1;
    cm_arena a;
    cm_arena_init(&a, 0);
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *o = &m->ops[i];
        if (o->kind != SP_OP_DOT_GENERAL || o->n_operands < 1) {
            continue;
        }
        const sp_attr *dn = sp_attrs_get(o->attrs, o->n_attrs, "dot_dimension_numbers");
        const int64_t *c = NULL;
        uint32_t nc = 0;
        if (!sp_attr_ints(params_item(dn, "lhs_contracting_dimensions"), &c, &nc, &a)) {
            continue;
        }
        const sp_type *t = sp_value_type(m, o->operands[0]);
        int64_t kk = 1;
        for (uint32_t j = 0; j < nc; j++) {
            if (c[j] >= 0 && c[j] < (int64_t)t->rank && t->dims[c[j]] > 0) {
                kk *= t->dims[c[j]];
            }
        }
        best = kk > best ? kk : best;
    }
    cm_arena_fini(&a);
    return best;
}

/* ---- partition and check -------------------------------------------------------- */

static bool has_collectives(const sp_module *m)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        sp_op_kind k = (sp_op_kind)m->ops[i].kind;
        if (k == SP_OP_SDY_ALL_GATHER || k == SP_OP_SDY_ALL_SLICE || k == SP_OP_SDY_ALL_REDUCE ||
            k == SP_OP_SDY_ALL_TO_ALL || k == SP_OP_SDY_COLLECTIVE_PERMUTE ||
            k == SP_OP_SDY_REDUCE_SCATTER || k == SP_OP_SDY_RESHARD) {
            return true;
        }
    }
    return false;
}

cm_status ex_partition(sp_module *m, cm_error *err)
{
    if (has_collectives(m)) {
        return CM_OK;
    }
    sp_diags d;
    sp_diags_init(&d);
    cm_status st_ = sp_pass_insert_explicit_reshards(m, NULL, &d, err);
    sp_diags_fini(&d);
    if (st_ == CM_OK) {
        st_ = sp_pass_reshard_to_collectives(m, false, err);
    }
    return st_;
}

cm_status ex_check_modules(sp_module *part, const sp_module *ref, const ex_check_opts *o,
                           ex_report *r, cm_error *err)
{
    memset(r, 0, sizeof *r);
    ex_tensor *args = NULL, *want = NULL, *got = NULL;
    uint32_t n_args = 0, n_want = 0, n_got = 0;
    cm_status st_ = ex_args_make(ref, o->seed, &args, &n_args, err);
    if (st_ != CM_OK) {
        return st_;
    }
    ex_exec_opts eo = {.replicated = true, .iters = 1, .iter_s = &r->ref_s};
    st_ = ex_exec_run(ref, &eo, args, n_args, &want, &n_want, err);
    if (st_ == CM_OK) {
        eo.replicated = false;
        eo.n_devices = o->n_devices > 0 ? o->n_devices : ex_module_devices(part);
        eo.iters = o->iters;
        eo.iter_s = o->iter_s;
        eo.affinity = o->affinity;
        eo.op_s = o->op_s;
        eo.op_from = o->op_from;
        r->n_devices = eo.n_devices;
        st_ = ex_exec_run(part, &eo, args, n_args, &got, &n_got, err);
    }
    if (st_ == CM_OK) {
        if (n_got != n_want) {
            st_ = cm_error_set(err, CM_EINVAL, NULL, "%u results, the reference has %u", n_got,
                               n_want);
        } else {
            ex_tensors_compare(want, got, n_want, ex_module_contraction(ref), &r->mm);
        }
    }
    if (st_ == CM_OK) {
        sp_cost_opts co;
        sp_cost_opts_init(&co);
        sp_cost *c = NULL;
        cm_error ce;
        cm_error_clear(&ce);
        if (sp_cost_compute(part, &co, &c, &ce) == CM_OK) {
            r->flops = sp_cost_get_summary(c)->flops * (double)r->n_devices;
            sp_cost_destroy(c);
        }
    }
    ex_tensors_free(args, n_args);
    ex_tensors_free(want, n_want);
    ex_tensors_free(got, n_got);
    return st_;
}

static cm_status read_planned(const char *text, size_t len, sp_module **out, cm_error *err)
{
    cm_status st_ = sp_mlir_read(text, len, 0, out, err);
    if (st_ != CM_OK || has_collectives(*out)) {
        return st_;
    }
    sp_prop_opts po;
    sp_prop_opts_init(&po, SP_PROP_USER_PRIORITY);
    sp_diags d;
    sp_diags_init(&d);
    st_ = sp_pass_propagation_pipeline(*out, &po, &d, err);
    sp_diags_fini(&d);
    if (st_ != CM_OK) {
        sp_module_destroy(*out);
        *out = NULL;
    }
    return st_;
}

cm_status ex_check_text(const char *text, size_t len, const ex_check_opts *o, ex_report *r,
                        cm_error *err)
{
    memset(r, 0, sizeof *r);
    sp_module *part = NULL, *ref = NULL;
    cm_status st_ = read_planned(text, len, &part, err);
    if (st_ == CM_OK) {
        st_ = read_planned(text, len, &ref, err);
    }
    if (st_ == CM_OK) {
        st_ = ex_partition(part, err);
    }
    if (st_ == CM_OK) {
        st_ = ex_check_modules(part, ref, o, r, err);
    }
    sp_module_destroy(part);
    sp_module_destroy(ref);
    return st_;
}

/* ---- `shardplan run` -------------------------------------------------------------- */

static void run_usage(FILE *f)
{
    fputs("usage: shardplan run FILE.mlir|GRAPH.json [--devices N] [--iters K] [--seed S] "
          "[--affinity|--no-affinity] [--ops N]\n"
          "  --ops N: after the runs, the N slowest ops and every collective, measured on each\n"
          "  device (mean and max) beside the cost model's prediction (the first run is left\n"
          "  out when there are several)\n",
          f);
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end = NULL;
    if (s == NULL || *s == '\0' || *s == '-') {
        return false;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0') {
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int ex_run_main(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *file = NULL;
    uint64_t devices = 0, iters = 3, seed = 1;
    ex_affinity affinity = EX_AFFINITY_AUTO;
    uint64_t top = 0;
    for (int i = 1; i < argc; i++) {
        bool ok = true;
        if (strcmp(argv[i], "--affinity") == 0 || strcmp(argv[i], "--no-affinity") == 0) {
            affinity = argv[i][2] == 'n' ? EX_AFFINITY_OFF : EX_AFFINITY_ON;
        } else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) {
            ok = parse_u64(argv[++i], &top) && top > 0 && top <= 100000;
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            ok = parse_u64(argv[++i], &devices) && devices > 0 && devices <= 4096;
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            ok = parse_u64(argv[++i], &iters) && iters > 0 && iters <= 100000;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            ok = parse_u64(argv[++i], &seed);
        } else if (strcmp(argv[i], "--help") == 0) {
            run_usage(out);
            return 0;
        } else if (argv[i][0] != '-' || strcmp(argv[i], "-") == 0) {
            ok = file == NULL;
            file = argv[i];
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(errs, "shardplan run: bad argument '%s'\n", argv[i]);
            run_usage(errs);
            return 2;
        }
    }
    if (file == NULL) {
        run_usage(errs);
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    sp_input part, ref;
    memset(&ref, 0, sizeof ref);
    if (sp_input_load(file, NULL, &part, &err) != CM_OK ||
        sp_input_load(file, NULL, &ref, &err) != CM_OK || ex_partition(part.m, &err) != CM_OK) {
        fprintf(errs, "shardplan run: %s: %s%s%s: %s\n", file, cm_status_name(err.code),
                err.path[0] != '\0' ? " at " : "", err.path, err.msg);
        if (part.m != NULL) {
            sp_input_fini(&part);
        }
        if (ref.m != NULL) {
            sp_input_fini(&ref);
        }
        return 1;
    }
    double *ts = cm_calloc((size_t)iters, sizeof(double)), *op_s = NULL;
    sp_cost *cost = NULL;
    uint32_t n_dev = 0;
    if (top > 0) {
        /* per-op timers, beside the cost model's per-op figures */
        op_s = ex_timing_timers(part.m, devices, &n_dev);
        cost = ex_timing_cost(&part);
    }
    ex_check_opts o = {.n_devices = (uint32_t)devices,
                       .iters = (uint32_t)iters,
                       .seed = seed,
                       .iter_s = ts,
                       .affinity = affinity,
                       .op_s = op_s,
                       .op_from = iters > 1 ? 1u : 0u};
    ex_report r;
    int rc = 0;
    if (ts == NULL || (top > 0 && op_s == NULL)) {
        cm_error_set(&err, CM_ENOMEM, NULL,
                     ts == NULL ? "out of memory" : "out of memory (or too many ops for --ops)");
    }
    if (err.code != CM_OK || ex_check_modules(part.m, ref.m, &o, &r, &err) != CM_OK) {
        fprintf(errs, "shardplan run: %s: %s%s%s: %s\n", file, cm_status_name(err.code),
                err.path[0] != '\0' ? " at " : "", err.path, err.msg);
        rc = 1;
    } else {
        fprintf(out, "%s: %u devices, %llu iterations, seed %llu\n", file, r.n_devices,
                (unsigned long long)iters, (unsigned long long)seed);
        for (uint64_t i = 0; i < iters; i++) {
            fprintf(out, "iter %llu: %.3f ms", (unsigned long long)i + 1, ts[i] * 1e3);
            if (r.flops > 0 && ts[i] > 0) {
                fprintf(out, ", %.2f GFLOP/s", r.flops / ts[i] * 1e-9);
            }
            fputc('\n', out);
        }
        qsort(ts, (size_t)iters, sizeof(double), cmp_double);
        double med = ts[iters / 2];
        fprintf(out, "median: %.3f ms", med * 1e3);
        if (r.flops > 0 && med > 0) {
            fprintf(out, ", %.2f GFLOP/s (%.3g FLOP per run, cost model)", r.flops / med * 1e-9,
                    r.flops);
        }
        fprintf(out, "; reference (1 device, unpartitioned): %.3f ms\n", r.ref_s * 1e3);
        if (r.mm.match) {
            fprintf(out, "numerics: match (max abs diff %.3g)\n", r.mm.max_abs_diff);
        } else {
            fprintf(out,
                    "numerics: MISMATCH at result %u index %zu %s: expected %.9g, got %.9g "
                    "(tolerance %.3g)\n",
                    r.mm.result, r.mm.index, r.mm.where, r.mm.expected, r.mm.got, r.mm.tol);
            rc = 1;
        }
        if (op_s != NULL && r.n_devices == n_dev) {
            ex_timing t = {part.m, part.g, cost, op_s, n_dev, iters - o.op_from};
            if (ex_timing_text(&t, (uint32_t)top, out) != CM_OK) {
                fprintf(errs, "shardplan run: out of memory\n");
                rc = 1;
            }
        }
    }
    sp_cost_destroy(cost);
    cm_free(op_s);
    cm_free(ts);
    sp_input_fini(&part);
    sp_input_fini(&ref);
    return rc;
}
