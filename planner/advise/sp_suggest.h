/* SPDX-License-Identifier: Apache-2.0
 * planner: the advisor's suggest. For the tensors of a module without a user
 * sharding (function inputs without `sdy.sharding`, op results without one
 * that no sharding_constraint reads), searches the sharding constraint to
 * add: every dimension x every mesh axis that divides it, all axes on one
 * dimension, two dimensions on two axes, for the largest values first
 * (o->max_candidates constraints), each scored by a full run (the plan's
 * pass, -sdy-insert-explicit-reshards, -sdy-reshard-to-collectives, sp_cost
 * in explicit mode) of the input with the constraint inserted, in parallel;
 * then greedily adds the constraint (among the best ones on other values)
 * that improves the best combination further, up to o->max_edits
 * constraints. Suggestions are the combination and the single constraints
 * (best per value) that reduce the objective, best first (docs/advisor.md
 * "Suggest"; the JSON is the advisor contract's). The command is
 * cmd/cmd_suggest.c.
 * Ownership: sp_suggest_run returns a heap object freed by sp_suggest_destroy;
 * its strings live inside it. Thread contract: sp_suggest_run starts and
 * joins its own threads and is reentrant; a built sp_suggest is read-only. */
#ifndef SP_SUGGEST_H
#define SP_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_input.h"

typedef enum sp_suggest_objective {
    SP_SUGGEST_TIME = 0, /* predicted step time */
    SP_SUGGEST_MEMORY    /* predicted per-device peak bytes */
} sp_suggest_objective;

/* "time", "memory"; false for another name. */
bool sp_suggest_objective_parse(const char *name, sp_suggest_objective *out);
const char *sp_suggest_objective_name(sp_suggest_objective o);

#define SP_SUGGEST_MAX_K     100 /* suggestions at most */
#define SP_SUGGEST_MAX_EDITS 8   /* constraints in one combination at most */

typedef struct sp_suggest_opts {
    sp_suggest_objective objective;
    uint32_t k;                /* suggestions at most, 1..100 (default 5) */
    const sp_profile *profile; /* NULL: sp_profile_default */
    uint32_t threads;          /* 0: online cores (at most 64) */
    uint32_t max_candidates;   /* constraints scored in the first round, 1..4096 (default 48) */
    uint32_t max_edits;        /* constraints in the greedy combination, 1..8 (default 3) */
    /* Polled before each candidate run, from the worker threads: returning
     * true stops the search, and sp_suggest_run fails with CM_EIO ("stopped")
     * once the runs under way finish. NULL: never stops. */
    bool (*cancel)(void *ctx);
    void *cancel_ctx;
} sp_suggest_opts;

void sp_suggest_opts_init(sp_suggest_opts *o);

/* The cost model's figures of one module, per device. */
typedef struct sp_suggest_figures {
    double step_s;
    double peak_bytes;
    double comm_bytes;
} sp_suggest_figures;

/* One "constrain" edit of the advisor contract. Strings are owned by the sp_suggest. */
typedef struct sp_suggest_edit {
    const char *value;    /* the VREF as JSON: {"input":0}, {"op":"/ops/5","result":0} */
    const char *vref;     /* its CLI text form: in:0, /ops/5, /ops/5#1, @fn:in:0 */
    const char *sharding; /* Shardy text, `<@mesh, [{"model"}, {}]>` */
    const char *label;    /* %arg0, %name of the graph, or "result 0 of /ops/5 (OP)" */
} sp_suggest_edit;

typedef struct sp_suggestion {
    uint32_t rank;                /* 1 = largest gain in the objective */
    const sp_suggest_edit *edits; /* usually one; a combination from the greedy search */
    uint32_t n_edits;
    const char *label;            /* the edits' labels joined by " + " */
    const char *op;               /* op defining the first edit's value ("func.func" for inputs) */
    uint32_t line;                /* its source line, 0 when unknown */
    const char *loc;              /* its loc text, or "" */
    const char *fix_shardy;       /* one `sdy.sharding_constraint ...` line per edit */
    const char *fix_jax;          /* one `jax.lax.with_sharding_constraint(...)` line per edit */
    sp_suggest_figures predicted; /* of the input with every edit applied */
    double gain_step_s;           /* baseline minus predicted (positive = better) */
    double gain_peak_bytes;
} sp_suggestion;

typedef struct sp_suggest sp_suggest;

/* Suggests constraints for len bytes of MLIR text or graph document (told
 * apart by a leading '{'), read through the input loader
 * (planner/doc/sp_input.h) with in_opts' pass, rules document and limits
 * (NULL: sp_input_opts_init's defaults; propagate and record_edges are not
 * used). The baseline and every candidate run propagate with that pass and
 * those rules, so a plan's suggestions are scored as the plan was made; the
 * options are copied, text and in_opts need not outlive the call. On
 * success *out is a new object freed with sp_suggest_destroy (it may hold no
 * suggestion). Errors: CM_EINVAL for bad options (err->path "/k",
 * "/max_candidates", "/max_edits", "/objective", "/threads"), those of
 * reading and planning the input itself (LINE:COL or a JSON Pointer, /rules...
 * for the rules document), CM_ENOMEM; *out is NULL then. A candidate whose
 * run fails is skipped and counted. Thread contract: starts and joins its
 * own threads; reentrant. */
cm_status sp_suggest_run(const char *text, size_t len, const sp_input_opts *in_opts,
                         const sp_suggest_opts *o, sp_suggest **out, cm_error *err);
void sp_suggest_destroy(sp_suggest *s);

uint32_t sp_suggest_n(const sp_suggest *s);
const sp_suggestion *sp_suggest_at(const sp_suggest *s, uint32_t i);
/* The input's own figures, computed as the candidates' are. */
const sp_suggest_figures *sp_suggest_baseline(const sp_suggest *s);

typedef struct sp_suggest_stats {
    uint32_t candidates; /* constraints the unannotated values allow */
    uint32_t evaluated;  /* full runs made (baseline excluded) */
    uint32_t failed;     /* runs that failed (propagation or partitioning errors) */
    uint32_t values;     /* unannotated values */
    uint32_t n_ops;      /* ops of the input module */
    double seconds;      /* wall time of sp_suggest_run */
} sp_suggest_stats;

const sp_suggest_stats *sp_suggest_get_stats(const sp_suggest *s);

/* Appends the input module with suggestion i's edits applied, as MLIR
 * before propagation (i = UINT32_MAX: no edit): what-if's edit application
 * (sp_whatif_edit_text) of the contract's "constrain" edits to the input as
 * given, i.e. the module a client gets by sending the edits to what-if
 * (under the run's input options: a rules document's rules are written
 * into the text). Errors: CM_EINVAL for a bad i, those of
 * sp_whatif_edit_text, CM_ENOMEM. */
cm_status sp_suggest_apply(const sp_suggest *s, uint32_t i, cm_buf *mlir, cm_error *err);

/* Appends the contract's JSON object / a text report. */
void sp_suggest_write_json(const sp_suggest *s, cm_buf *b);
void sp_suggest_write_text(const sp_suggest *s, cm_buf *b);

/* A benchmark of MLIR text on this machine, supplied by a higher layer (the
 * executor: ex_measure_text) for `suggest --check`: the module is
 * propagated, partitioned and run iters times; step_s is the median wall
 * time of one run. */
typedef struct sp_suggest_measure {
    double step_s;    /* measured seconds per step */
    uint32_t devices; /* local devices (worker threads) used */
    bool numerics_ok; /* the partitioned run matched the single-device one */
    char note[192];   /* "match", or where the first mismatch is */
} sp_suggest_measure;

typedef cm_status (*sp_suggest_bench_fn)(const char *mlir, size_t len, uint32_t iters,
                                         sp_suggest_measure *out, cm_error *err);

/* The check of `suggest --check`: the input ([0]) and the top suggestion
 * ([1]) measured on this machine, against their predicted step times. */
typedef struct sp_suggest_check {
    uint32_t iters;           /* runs of each module */
    bool done[2];             /* measured */
    sp_suggest_measure ms[2]; /* when done */
    char error[2][CM_ERROR_PATH_LEN + CM_ERROR_MSG_LEN + 4]; /* why not, when !done */
} sp_suggest_check;

/* Measures the input and, when there is a suggestion, the top one with
 * bench, each as sp_suggest_apply gives its module, iters runs each, into c.
 * A failed measurement is recorded in c (done false, error), not returned.
 * Thread contract: as bench's. */
void sp_suggest_check_run(const sp_suggest *s, sp_suggest_bench_fn bench, uint32_t iters,
                          sp_suggest_check *c);
/* Appends the contract's JSON object with a "check" member / the check's
 * lines, to follow sp_suggest_write_text. */
void sp_suggest_check_write_json(const sp_suggest *s, const sp_suggest_check *c, cm_buf *b);
void sp_suggest_check_write_text(const sp_suggest *s, const sp_suggest_check *c, cm_buf *b);

#endif /* SP_SUGGEST_H */
