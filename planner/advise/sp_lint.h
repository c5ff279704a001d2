/* SPDX-License-Identifier: Apache-2.0
 * planner: the plan advisor's lint and collective inventory (docs/advisor.md).
 * `lint` reads a module (MLIR or graph document), propagates, partitions and
 * costs it, and reports what silently costs memory or time: dimensions not
 * divisible by their axes, custom calls without a sharding rule, unmatched
 * Flax logical axis names, all-gathers to replicated that are sliced again
 * (full rematerialisation), function inputs and outputs on different meshes,
 * sub-axes at the function boundary, and per-device memory over the
 * profile's capacity. Each finding names the op, value, MLIR location and
 * bytes at stake, with a fix as a Shardy sharding constraint and as a JAX
 * PartitionSpec. The same run lists every collective the partitioner
 * inserted with its cost (from sp_cost) and its cause. The other advisor
 * modules have their own headers: sp_sweep.h, sp_suggest.h, sp_whatif.h,
 * sp_compare.h. The commands are cmd/cmd_lint.c.
 * Ownership: sp_advise_run returns a heap object freed by sp_advise_destroy;
 * its strings live inside it. Thread contract: an sp_advise is read-only once
 * built; runs on different inputs may proceed in parallel. */
#ifndef SP_LINT_H
#define SP_LINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_input.h"

typedef enum sp_lint_kind {
    SP_LINT_NON_DIVISIBLE = 0, /* a dimension not divisible by the product of its axes */
    SP_LINT_CUSTOM_CALL,       /* a custom call without a sharding rule (forces replication) */
    SP_LINT_LOGICAL_AXIS,      /* a logical axis name no logical_axis_rules entry maps */
    SP_LINT_REMAT,             /* all-gather to replicated, then sliced again */
    SP_LINT_MESH_MISMATCH,     /* inputs/outputs on different meshes (jax.export rejects it) */
    SP_LINT_MEMORY,            /* per-device peak over the profile's capacity */
    SP_LINT_SUB_AXIS,          /* a sub-axis at the function boundary (PartitionSpec cannot say it) */
    SP_LINT_N_KINDS
} sp_lint_kind;

typedef enum sp_lint_sev { SP_LINT_INFO = 0, SP_LINT_WARNING, SP_LINT_ERROR } sp_lint_sev;

/* "non_divisible", "custom_call_no_rule", ...; "info", "warning", "error". */
const char *sp_lint_kind_name(sp_lint_kind k);
const char *sp_lint_sev_name(sp_lint_sev s);

/* One finding. Strings are owned by the sp_advise; "" when not applicable. */
typedef struct sp_finding {
    sp_lint_kind kind;
    sp_lint_sev sev;
    const char *op;         /* op name ("stablehlo.custom_call", "func.func") */
    uint32_t line;          /* 1-based source line of the op, 0 when unknown */
    const char *loc;        /* text inside the op's loc(...), or "" */
    const char *source;     /* where its location says the op comes from ("model.py:14"), or "" */
    const char *value;      /* "%arg0", the graph value name, or "result 0 of OP" */
    double bytes;           /* per-device bytes at stake */
    const char *message;    /* what is wrong */
    const char *fix_shardy; /* `sdy.sharding_constraint %x <@mesh, [{"data"}, {}]>` */
    const char *fix_jax;    /* `P('data', None)` (with the JAX call that applies it) */
} sp_finding;

/* One collective of the partitioned module with its cost and cause. */
typedef struct sp_advise_coll {
    sp_cost_coll cost;  /* from sp_cost (op is the collective's op id) */
    const char *op;     /* "sdy.all_gather", ... */
    const char *for_op; /* the op it serves: consumer of a reshard, producer of a reduction */
    uint32_t line;      /* source line of for_op (0 when unknown) */
    const char *loc;    /* loc of for_op, or "" */
    const char *source; /* source line of for_op's location ("model.py:14"), or "" */
    const char *cause;  /* sharding origin or conflict that made it */
} sp_advise_coll;

typedef struct sp_advise sp_advise;

typedef struct sp_advise_opts {
    const sp_profile *profile; /* NULL: sp_profile_default */
    const char *mesh;          /* mesh the I/O check and fixes use; NULL: the first input's */
    double min_bytes;          /* findings below this many per-device bytes are dropped (0: keep) */
} sp_advise_opts;

void sp_advise_opts_init(sp_advise_opts *o);

/* Lints len bytes of MLIR text or graph document (told apart by a leading
 * '{'), read through the input loader (planner/doc/sp_input.h) with in_opts'
 * pass, rules document and limits (NULL: sp_input_opts_init's defaults; its
 * propagate and record_edges are not used): checks the user's shardings,
 * runs the pass (origins recorded) unless the module is already
 * partitioned, -sdy-insert-explicit-reshards and -sdy-reshard-to-collectives,
 * costs the result (explicit mode) and collects findings and collectives.
 * So a plan is linted under the pass and custom rules it was made with.
 * On success *out is a new object freed with sp_advise_destroy. Errors: those
 * of reading and propagation (CM_EINVAL with a JSON Pointer or LINE:COL, at
 * /rules... for the rules document), CM_EINVAL at /mesh for an unknown
 * o->mesh, CM_ENOMEM; *out is NULL then. in_opts and text are only read
 * during the call. */
cm_status sp_advise_run(const char *text, size_t len, const sp_input_opts *in_opts,
                        const sp_advise_opts *o, sp_advise **out, cm_error *err);
void sp_advise_destroy(sp_advise *a);

uint32_t sp_advise_n_findings(const sp_advise *a);
const sp_finding *sp_advise_finding_at(const sp_advise *a, uint32_t i);
/* Number of findings of kind k. */
uint32_t sp_advise_count(const sp_advise *a, sp_lint_kind k);
uint32_t sp_advise_n_colls(const sp_advise *a);
const sp_advise_coll *sp_advise_coll_at(const sp_advise *a, uint32_t i);
/* The cost of the partitioned module, borrowed. */
const sp_cost_summary *sp_advise_summary(const sp_advise *a);

/* Appends `{"findings":[...],"counts":{...},"peak_bytes":...}` / a text report. */
void sp_advise_write_lint_json(const sp_advise *a, cm_buf *b);
void sp_advise_write_lint_text(const sp_advise *a, cm_buf *b);
/* Appends `{"collectives":[...],"bytes":...,"seconds":...}` / a table. */
void sp_advise_write_colls_json(const sp_advise *a, cm_buf *b);
void sp_advise_write_colls_text(const sp_advise *a, cm_buf *b);

#endif /* SP_LINT_H */
