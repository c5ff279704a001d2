/* SPDX-License-Identifier: Apache-2.0
 * planner: the advisor's sweep (docs/advisor.md "Sweep"): plans the
 * transformer template of sp_example over the 2-D factorisations data x model
 * of a device count and the strategies, in parallel, ranks the variants by
 * predicted step time under the memory limit and marks the memory/time
 * Pareto front. The command is cmd/cmd_sweep.c.
 * Ownership: sp_sweep_run fills caller storage released by
 * sp_sweep_result_fini. Thread contract: sp_sweep_run starts and joins its
 * own threads and is reentrant. */
#ifndef SP_SWEEP_H
#define SP_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_input.h"

typedef struct sp_sweep_opts {
    int64_t devices; /* every 2-D factorisation data x model of this count */
    uint32_t layers; /* transformer template (sp_example_opts) */
    int64_t d_model, heads, seq, batch;
    bool train;
    uint32_t strategies; /* bit mask of 1 << sp_example_strategy; 0: all four */
    uint32_t threads;    /* 0: online cores */
    uint32_t jobs;       /* plans to run, cycling over the variants (benchmarks); 0: one each */
    const sp_profile *profile; /* NULL: sp_profile_default */
    /* Polled before each variant, from the worker threads: true stops the
     * sweep, which then fails with CM_EIO ("stopped"). NULL: never stops. */
    bool (*cancel)(void *ctx);
    void *cancel_ctx;
} sp_sweep_opts;

void sp_sweep_opts_init(sp_sweep_opts *o);

#define SP_SWEEP_MAX_AXES 8       /* axes of a module's mesh a sweep redistributes */
#define SP_SWEEP_MAX_VARIANTS 512 /* meshes of one module sweep */
#define SP_SWEEP_MAX_LOGICAL 16   /* logical axis names a rules sweep varies */
#define SP_SWEEP_RULES_LEN 640    /* a variant's rules as JSON text */

typedef struct sp_sweep_row {
    int64_t data, model;                                  /* mesh data=data,model=model */
    int strategy;                                         /* sp_example_strategy; -1: the module's own */
    int64_t sizes[SP_SWEEP_MAX_AXES];                     /* the mesh: sizes of the result's axes */
    bool ok;                                              /* planned and costed */
    char error[CM_ERROR_PATH_LEN + CM_ERROR_MSG_LEN + 4]; /* why not, when !ok */
    double step_s, peak_bytes, comm_bytes, flops;
    bool fits;     /* peak under the profile's capacity */
    double capacity_bytes; /* the profile's memory per device for this mesh (0: unknown) */
    bool pareto;   /* on the front of (peak_bytes, step_s) among ok rows */
    uint32_t rank; /* 1 = fastest that fits; 0 for rows that do not fit or failed */
    /* a rules sweep: the variant's logical_axis_rules as JSON text, and
     * whether they are the document's own */
    char rules[SP_SWEEP_RULES_LEN];
    bool own;
} sp_sweep_row;

typedef struct sp_sweep_result {
    sp_sweep_row *rows; /* heap, sorted by rank (fitting first), then step time */
    uint32_t n_rows;
    uint32_t n_ops;     /* ops of one variant's module */
    uint32_t n_jobs;    /* plans run (n_rows, or o->jobs) */
    double seconds;     /* wall time of the sweep */
    double cpu_seconds; /* CPU time of the process during the sweep (all threads) */
    char profile[SP_PROFILE_NAME_LEN]; /* the device profile's name */
    /* The mesh axes the rows give sizes for (data, model for the template). */
    uint32_t n_axes;
    char axes[SP_SWEEP_MAX_AXES][64];
    char mesh[64];   /* a module sweep's mesh name ("" for the template) */
    bool of_module;  /* rows are meshes of the user's module (sp_sweep_module_run) */
    bool of_rules;   /* rows are logical-axis-rule variants (sp_sweep_rules_run) */
    bool neighbours; /* of_rules: one name changed at a time (the full product was too many) */
    uint32_t n_logical; /* of_rules: the logical names varied */
    bool dropped_device_ids; /* the module's mesh had device_ids; variants use the default order */
} sp_sweep_result;

/* Plans and costs every variant on o->threads threads. Each strategy's graph
 * is generated and decoded once; variants are its MLIR text with their own
 * mesh, kept when o->jobs cycles over the variants again. Errors: CM_EINVAL
 * for bad options (err->path "/devices", ...), CM_ENOMEM. Per-variant failures
 * are rows with ok = false. The caller frees res with sp_sweep_result_fini.
 * Thread contract: starts and joins its own threads; reentrant. */
cm_status sp_sweep_run(const sp_sweep_opts *o, sp_sweep_result *res, cm_error *err);
/* The user's model over the meshes of a device count: text (len bytes, a
 * graph document or MLIR, read as in_opts says: its pass and rules; NULL:
 * the defaults) has its mesh (mesh_name, or NULL for the module's main
 * mesh: the first with an axis of size > 1, else the first) re-sized to
 * every assignment of sizes to its axes, names and order kept, whose
 * product is o->devices (0: the mesh's own device count); each variant is
 * propagated with the input's pass, partitioned and costed as the advisor
 * costs plans, on o->threads threads, and ranked as sp_sweep_run ranks
 * (strategy -1 in every row). The template options of o (layers, ...,
 * strategies, jobs) are ignored. A mesh with device_ids gets the default
 * device order in every variant (res->dropped_device_ids). Errors: those of
 * reading text, CM_EINVAL at /mesh (no such mesh, no mesh, more than
 * SP_SWEEP_MAX_AXES axes), at /devices (out of [1, 65536], or more than
 * SP_SWEEP_MAX_VARIANTS meshes), CM_EIO when o->cancel stopped it,
 * CM_ENOMEM. Per-variant failures (a sharding's sub-axis that no longer
 * divides its axis, ...) are rows with ok = false. */
cm_status sp_sweep_module_run(const char *text, size_t len, const sp_input_opts *in_opts,
                              const char *mesh_name, const sp_sweep_opts *o,
                              sp_sweep_result *res, cm_error *err);
/* A Flax graph document's logical-axis-rule variants: text (len bytes, a
 * graph document read as in_opts says) keeps its mesh (mesh_name, or NULL
 * for the main one) and gets, instead of its logical_axis_rules, one rule
 * [name, axis] or [name, null] for each logical axis name it uses (in its
 * rules or any logical_axes, at most SP_SWEEP_MAX_LOGICAL): every
 * assignment of the mesh's axes or none to the names when there are at
 * most SP_SWEEP_MAX_VARIANTS - 1 of them, else (res->neighbours) the
 * document's own assignment with one name moved to each other choice. The
 * document's own rules are one more row (own), and an assignment equal to
 * them is not repeated. Each variant is decoded as
 * flax.linen.logical_to_mesh_axes resolves rules (docs/graph-format.md),
 * propagated with the input's pass, partitioned, costed and ranked as
 * sp_sweep_module_run does; o->devices and the template options are
 * ignored. Errors: those of reading text, CM_EINVAL at /logical_axis_rules
 * (not a graph document, no logical axis names, more than
 * SP_SWEEP_MAX_LOGICAL names, a variant's rules longer than
 * SP_SWEEP_RULES_LEN), at /mesh as sp_sweep_module_run, CM_EIO when
 * o->cancel stopped it, CM_ENOMEM. */
cm_status sp_sweep_rules_run(const char *text, size_t len, const sp_input_opts *in_opts,
                             const char *mesh_name, const sp_sweep_opts *o, sp_sweep_result *res,
                             cm_error *err);
void sp_sweep_result_fini(sp_sweep_result *res);
void sp_sweep_write_json(const sp_sweep_result *res, cm_buf *b);
void sp_sweep_write_text(const sp_sweep_result *res, cm_buf *b);

#endif /* SP_SWEEP_H */
