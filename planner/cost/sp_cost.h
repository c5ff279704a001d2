/* SPDX-License-Identifier: Apache-2.0
 * planner: the per-device cost model of a sharded module (docs/cost-model.md):
 * parameter and input bytes, peak live activation bytes from a liveness walk
 * in program order, FLOPs per op from local shapes, and communication per
 * collective (bytes on the wire per device, mesh axes, group size), read from
 * explicit sdy collectives when the module is partitioned, else estimated from
 * the shardings each op implies. With a device profile (peak FLOP/s per dtype,
 * memory capacity and bandwidth, link bandwidth and latency per mesh axis) it
 * predicts a step time under a documented overlap model and checks that the
 * peak fits the device memory.
 * Ownership: sp_cost_compute returns a heap object freed by sp_cost_destroy;
 * the strings it holds point into the module, which must outlive it.
 * Thread contract: one module per call; a finished sp_cost is read-only and
 * may be read by many threads. */
#ifndef SP_COST_H
#define SP_COST_H

#include "cm.h"
#include "sp_ir.h"
#include "sp_rules.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- device profiles (docs/device-profiles.md) ------------------------------- */

/* The dtype classes a profile gives a peak rate for. */
typedef enum sp_cost_dtype {
    SP_COST_F64 = 0,
    SP_COST_F32,
    SP_COST_TF32, /* f32 matmuls on tensor cores; used for dot/convolution in f32 when set */
    SP_COST_BF16,
    SP_COST_F16,
    SP_COST_F8,
    SP_COST_INT8, /* also sub-byte integers */
    SP_COST_INT32, /* other integers and booleans */
    SP_COST_N_DTYPES
} sp_cost_dtype;

#define SP_PROFILE_MAX_LINKS 16
#define SP_PROFILE_NAME_LEN  64
#define SP_PROFILE_TEXT_LEN  512
#define SP_PROFILE_MAX_GEMM  12

/* One point of a matmul rate curve: an n x n x n f32 product runs at flops
 * FLOP/s on a device (a per-call size; small products run below the peak). */
typedef struct sp_profile_gemm {
    double n;
    double flops;
} sp_profile_gemm;

/* One interconnect: per device, one direction. */
typedef struct sp_profile_link {
    char axis[SP_PROFILE_NAME_LEN]; /* mesh axis name; "" for the default link */
    double bandwidth;               /* bytes/s a device sends on this axis */
    double latency;                 /* seconds per step of a collective */
} sp_profile_link;

typedef struct sp_profile {
    char name[SP_PROFILE_NAME_LEN];
    char source[SP_PROFILE_TEXT_LEN];         /* where the figures come from */
    double peak_flops[SP_COST_N_DTYPES];      /* FLOP/s; 0: not given */
    double mem_bytes;                         /* memory capacity per device, bytes (0: unknown) */
    bool mem_shared;                          /* mem_bytes is shared by every device of the mesh */
    double mem_bandwidth;                     /* bytes/s */
    sp_profile_link link;                     /* default link for axes not listed */
    sp_profile_link links[SP_PROFILE_MAX_LINKS];
    uint32_t n_links;
    double overlap;                           /* fraction of communication hidden, [0, 1] */
    sp_profile_gemm gemm[SP_PROFILE_MAX_GEMM]; /* by ascending n; n_gemm 0: the peak for all */
    uint32_t n_gemm;
    double transcendentals;                   /* exp, log, tanh... elements/s; 0: not given */
    bool calibrated;                          /* measured on this machine ("calibrated": true) */
} sp_profile;

/* Fills p with the built-in copy of profiles/cpu-local.json (this machine's
 * CPU workers, one OpenBLAS thread each). */
void sp_profile_default(sp_profile *p);

/* Peak FLOP/s of p for dtype d, falling back to f32 and then to the largest
 * given rate; is_matmul selects tf32 for f32 when the profile has it. */
double sp_profile_peak(const sp_profile *p, sp_cost_dtype d, bool is_matmul);

/* FLOP/s of one dot of dtype d whose every call (one per batch element)
 * multiplies m x k by k x n: the peak scaled by p's gemm curve at the
 * call's size (cube root of m k n), read between its points on a log scale
 * and held flat beyond its ends; the peak alone without a curve. */
double sp_profile_dot_rate(const sp_profile *p, sp_cost_dtype d, double m, double k, double n);

/* The link of mesh axis name (the default link when not listed). */
const sp_profile_link *sp_profile_link_of(const sp_profile *p, const char *axis);

/* ---- the cost ---------------------------------------------------------------- */

typedef enum sp_cost_mode {
    SP_COST_AUTO = 0, /* explicit when the module has sdy collectives or reshards, else implied */
    SP_COST_EXPLICIT, /* communication only from sdy collectives and reshards */
    SP_COST_IMPLIED   /* also estimate what each op's shardings imply */
} sp_cost_mode;

typedef enum sp_coll_kind {
    SP_COLL_ALL_REDUCE = 0,
    SP_COLL_ALL_GATHER,
    SP_COLL_REDUCE_SCATTER,
    SP_COLL_ALL_TO_ALL,
    SP_COLL_PERMUTE,
    SP_COLL_ALL_SLICE,
    SP_COLL_N_KINDS
} sp_coll_kind;

const char *sp_coll_kind_name(sp_coll_kind k);

#define SP_COST_MAX_COLL_AXES 8

/* One collective, per device. */
typedef struct sp_cost_coll {
    uint32_t op;             /* op id (the collective, or the op that implies it) */
    sp_coll_kind kind;
    bool implied;            /* estimated from shardings: no such op in the module */
    uint32_t operand;        /* implied reshard of this operand; SP_NONE for a result */
    const char *axes[SP_COST_MAX_COLL_AXES]; /* mesh axis names (module-owned) */
    uint32_t n_axes;
    int64_t group;           /* devices per group: product of the axis sizes */
    double tensor_bytes;     /* S of the formula: the local tensor the formula names, bytes */
    double bytes;            /* bytes on the wire per device */
    double time_s;           /* latency * steps + bytes / bandwidth of the slowest axis */
    double count;            /* times it runs (calls of its function) */
} sp_cost_coll;

/* Communication summed over collectives that use the same set of axes. */
typedef struct sp_cost_axis {
    char axes[128];  /* "model", "data,model" */
    double bytes;    /* per device, summed over every run */
    double time_s;
    uint32_t n_colls;
    double runs;     /* times they run in all: a loop body's collectives once per trip */
} sp_cost_axis;

typedef struct sp_cost_summary {
    bool partitioned;        /* communication from explicit collectives (else implied) */
    int64_t devices;         /* devices of the largest mesh */
    uint32_t n_ops;          /* ops costed */
    double param_bytes;      /* per device: function arguments classed as parameters */
    double input_bytes;      /* per device: the other arguments */
    double output_bytes;     /* per device: function results */
    double peak_activation_bytes; /* per device: peak live op results */
    double peak_bytes;       /* param + input + peak activation */
    double flops;            /* per device */
    double flops_dot;        /* dot_general, dot, convolution */
    double flops_elementwise;
    double flops_reduce;
    double flops_other;
    double mem_traffic_bytes;/* operand + result bytes of compute ops */
    double comm_bytes;       /* per device, all collectives */
    double compute_s;        /* sum over ops of the roofline time */
    double comm_s;           /* sum over collectives */
    double overlap;          /* fraction used */
    double hidden_s;         /* min(overlap * comm_s, compute_s) */
    double step_s;           /* compute_s + comm_s - hidden_s */
    double capacity_bytes;   /* memory per device from the profile (0: unknown) */
    bool fits;               /* peak_bytes <= capacity_bytes (true when unknown) */
    char profile[SP_PROFILE_NAME_LEN];
    bool profile_calibrated; /* the profile says it was measured on this machine */
    uint32_t peak_op;        /* top-level op of a root function at the peak; SP_NONE if none */
    uint32_t peak_inner_op;  /* the op inside peak_op's regions or callee at their peak, or SP_NONE */
    double kind_bytes[SP_COLL_N_KINDS]; /* communication per collective kind, all runs */
    double kind_s[SP_COLL_N_KINDS];
    uint32_t kind_colls[SP_COLL_N_KINDS];
} sp_cost_summary;

typedef struct sp_cost sp_cost;

typedef struct sp_cost_opts {
    const sp_profile *profile;     /* NULL: sp_profile_default */
    sp_cost_mode mode;
    double overlap;                /* < 0: the profile's */
    const sp_custom_rules *custom; /* rules for custom calls (implied mode), may be NULL */
    const char *const *value_names; /* by value id, for parameter/input roles; may be NULL */
    uint32_t n_value_names;         /* entries of value_names (sp_graph_value_names) */
    bool per_op;                   /* keep each op's figures (sp_cost_op_at) */
    bool timeline;                 /* keep live bytes at each top-level op (sp_cost_mem_at) */
} sp_cost_opts;

void sp_cost_opts_init(sp_cost_opts *o);

/* Costs module m (after propagation; after partitioning when available). m
 * is not changed except that sharding rules may be derived into its arena.
 * On success *out is a new object the caller frees with sp_cost_destroy.
 * Errors: CM_ENOMEM; CM_EINVAL for malformed op attributes (a rule that does
 * not derive). */
cm_status sp_cost_compute(sp_module *m, const sp_cost_opts *o, sp_cost **out, cm_error *err);
void sp_cost_destroy(sp_cost *c);

const sp_cost_summary *sp_cost_get_summary(const sp_cost *c);
uint32_t sp_cost_n_colls(const sp_cost *c);
const sp_cost_coll *sp_cost_coll_at(const sp_cost *c, uint32_t i);
uint32_t sp_cost_n_axes(const sp_cost *c);
const sp_cost_axis *sp_cost_axis_at(const sp_cost *c, uint32_t i);
/* One op's figures per device, summed over the times it runs (the calls
 * of its function), with opts.per_op; zeros otherwise, for ops that cost
 * nothing (returns, constants) and for op ids out of range. */
typedef struct sp_cost_op {
    double flops;
    double time_s; /* roofline: max(flops / peak, operand + result bytes / bandwidth) */
} sp_cost_op;
sp_cost_op sp_cost_op_at(const sp_cost *c, uint32_t op);
/* Memory over program order (opts.timeline): one point per top-level op of
 * each root function, in program order, with what is live on a device while
 * that op runs (its operands and its results both held, as the peak is
 * taken). parameter and input bytes are the summary's, resident throughout;
 * activation_bytes are the op results of the function's own block still
 * needed (loop-carried and donated buffers as docs/cost-model.md says);
 * temporary_bytes are what the op's regions or callee hold on top while it
 * runs. The peak is the point of largest activation + temporary bytes. */
typedef struct sp_cost_mem_point {
    uint32_t op;            /* op id */
    double activation_bytes;
    double temporary_bytes;
    uint32_t inner_op;      /* the op inside its regions or callee at their peak, or SP_NONE */
} sp_cost_mem_point;
uint32_t sp_cost_n_mem(const sp_cost *c);
const sp_cost_mem_point *sp_cost_mem_at(const sp_cost *c, uint32_t i);

typedef enum sp_cost_buf_kind {
    SP_COST_BUF_PARAMETER = 0,
    SP_COST_BUF_INPUT,
    SP_COST_BUF_ACTIVATION
} sp_cost_buf_kind;

/* One buffer live at the peak (opts.timeline), largest first: function
 * arguments and the op results live at summary.peak_op. At most
 * SP_COST_MAX_PEAK_BUFFERS. */
#define SP_COST_MAX_PEAK_BUFFERS 16
typedef struct sp_cost_buffer {
    uint32_t value; /* value id */
    sp_cost_buf_kind kind;
    double bytes;   /* per device */
} sp_cost_buffer;
uint32_t sp_cost_n_peak_buffers(const sp_cost *c);
const sp_cost_buffer *sp_cost_peak_buffer_at(const sp_cost *c, uint32_t i);
const char *sp_cost_buf_kind_name(sp_cost_buf_kind k);

/* Appends the memory timeline as JSON (`{"devices":8,"same_on_every_device":
 * true,"parameter_bytes":...,"peak":{...},"largest_buffers":[...],"points":
 * [...]}`, docs/cost-model.md), at most max_points points: a longer program
 * is cut into runs of consecutive ops, each point the largest of its run
 * (the peak is kept). with_lines adds the MLIR line of each op. c must have
 * been computed with opts.timeline; names come from opts.value_names (which
 * must still be valid), else from the values' locations. */
void sp_cost_write_memory_json(const sp_cost *c, const sp_module *m, uint32_t max_points,
                               bool with_lines, cm_buf *b);

/* Per-device bytes of the local shard of value v (0 for non-tensors). */
double sp_cost_value_bytes(const sp_module *m, uint32_t v);

/* Appends the cost as a JSON object (`{"mode":...}`), or as a human-readable
 * table. */
void sp_cost_write_json(const sp_cost *c, const sp_module *m, cm_buf *b);
void sp_cost_write_text(const sp_cost *c, const sp_module *m, cm_buf *b);
/* "OOM predicted on every device: 21.3 GiB > 16 GiB" into buf (empty when
 * the peak fits or the capacity is unknown). */
void sp_cost_oom_message(const sp_cost *c, char *buf, size_t len);

/* The plan document's hook (sp_plan_run): appends `,\n"cost":{...}` and the
 * memory timeline `,\n"memory":{...}` (sp_cost_write_memory_json, at most
 * 2048 points) for m with the default profile, or both null when costing
 * fails (the plan stays valid; out is marked failed on ENOMEM). The section does not depend
 * on the input's syntax: no source lines, parameters told by structure. */
void sp_cost_plan_section(sp_module *m, const sp_custom_rules *custom, cm_buf *out);

#endif /* SP_COST_H */
