/* SPDX-License-Identifier: Apache-2.0
 * planner: the plan advisor (docs/advisor.md). `lint` reads a module (MLIR or
 * graph document), propagates, partitions and costs it, and reports what
 * silently costs memory or time: dimensions not divisible by their axes,
 * custom calls without a sharding rule, unmatched Flax logical axis names,
 * all-gathers to replicated that are sliced again (full rematerialisation),
 * function inputs and outputs on different meshes, and per-device memory over
 * the profile's capacity. Each finding names the op, value, MLIR location and
 * bytes at stake, with a fix as a Shardy sharding constraint and as a JAX
 * PartitionSpec. The same run lists every collective the partitioner inserted
 * with its cost (from sp_cost) and its cause. `sweep` plans the transformer
 * template over the 2-D factorisations of a device count and the strategies,
 * in parallel, ranks the variants by predicted step time under the memory
 * limit and marks the memory/time Pareto front. `suggest` searches the
 * sharding constraints to add to unannotated tensors, each scored by a full
 * plan + partition + cost, and proposes those that most reduce predicted step
 * time or memory.
 * Ownership: sp_advise_run returns a heap object freed by sp_advise_destroy;
 * its strings live inside it. Thread contract: an sp_advise is read-only once
 * built; runs on different inputs may proceed in parallel. */
#ifndef SP_ADVISE_H
#define SP_ADVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cm.h"
#include "sp_cost.h"

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
 * '{'): checks the user's shardings, runs -sdy-propagation-pipeline (origins
 * recorded), -sdy-insert-explicit-reshards and -sdy-reshard-to-collectives,
 * costs the result (explicit mode) and collects findings and collectives.
 * On success *out is a new object freed with sp_advise_destroy. Errors: those
 * of reading and propagation (CM_EINVAL with a JSON Pointer or LINE:COL),
 * CM_ENOMEM; *out is NULL then. */
cm_status sp_advise_run(const char *text, size_t len, const sp_advise_opts *o, sp_advise **out,
                        cm_error *err);
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

/* ---- sweep ------------------------------------------------------------------- */

typedef struct sp_sweep_opts {
    int64_t devices; /* every 2-D factorisation data x model of this count */
    uint32_t layers; /* transformer template (sp_example_opts) */
    int64_t d_model, heads, seq, batch;
    bool train;
    uint32_t strategies; /* bit mask of 1 << sp_example_strategy; 0: all four */
    uint32_t threads;    /* 0: online cores */
    uint32_t jobs;       /* plans to run, cycling over the variants (benchmarks); 0: one each */
    const sp_profile *profile; /* NULL: sp_profile_default */
} sp_sweep_opts;

void sp_sweep_opts_init(sp_sweep_opts *o);

typedef struct sp_sweep_row {
    int64_t data, model;                                  /* mesh data=data,model=model */
    int strategy;                                         /* sp_example_strategy */
    bool ok;                                              /* planned and costed */
    char error[CM_ERROR_PATH_LEN + CM_ERROR_MSG_LEN + 4]; /* why not, when !ok */
    double step_s, peak_bytes, comm_bytes, flops;
    bool fits;     /* peak under the profile's capacity */
    double capacity_bytes; /* the profile's memory per device for this mesh (0: unknown) */
    bool pareto;   /* on the front of (peak_bytes, step_s) among ok rows */
    uint32_t rank; /* 1 = fastest that fits; 0 for rows that do not fit or failed */
} sp_sweep_row;

typedef struct sp_sweep_result {
    sp_sweep_row *rows; /* heap, sorted by rank (fitting first), then step time */
    uint32_t n_rows;
    uint32_t n_ops;     /* ops of one variant's module */
    uint32_t n_jobs;    /* plans run (n_rows, or o->jobs) */
    double seconds;     /* wall time of the sweep */
    double cpu_seconds; /* CPU time of the process during the sweep (all threads) */
    char profile[SP_PROFILE_NAME_LEN]; /* the device profile's name */
} sp_sweep_result;

/* Plans and costs every variant on o->threads threads. Each strategy's graph
 * is generated and decoded once; variants are its MLIR text with their own
 * mesh, kept when o->jobs cycles over the variants again. Errors: CM_EINVAL
 * for bad options (err->path "/devices", ...), CM_ENOMEM. Per-variant failures
 * are rows with ok = false. The caller frees res with sp_sweep_result_fini.
 * Thread contract: starts and joins its own threads; reentrant. */
cm_status sp_sweep_run(const sp_sweep_opts *o, sp_sweep_result *res, cm_error *err);
void sp_sweep_result_fini(sp_sweep_result *res);
void sp_sweep_write_json(const sp_sweep_result *res, cm_buf *b);
void sp_sweep_write_text(const sp_sweep_result *res, cm_buf *b);

/* `shardplan lint FILE [--mesh NAME] [--profile NAME|FILE] [--min-bytes N] [--json]`,
 * `shardplan collectives FILE [--profile NAME|FILE] [--json]`, `shardplan sweep
 * [--devices N] [--layers N ...] [--json]`; argv[0] is the command. Return an
 * exit status: lint returns 1 when a finding has severity error. */
int sp_lint_main(int argc, char **argv, FILE *out, FILE *errs);
int sp_collectives_main(int argc, char **argv, FILE *out, FILE *errs);
int sp_sweep_main(int argc, char **argv, FILE *out, FILE *errs);

/* ---- suggest ----------------------------------------------------------------
 * For the tensors of a module without a user sharding (function inputs
 * without `sdy.sharding`, op results without one that no sharding_constraint
 * reads), searches the sharding constraint to add: every dimension x every
 * mesh axis that divides it, all axes on one dimension, two dimensions on two
 * axes, for the largest values first (o->max_candidates constraints), each
 * scored by a full run (-sdy-propagation-pipeline, -sdy-insert-explicit-reshards,
 * -sdy-reshard-to-collectives, sp_cost in explicit mode) of the input with
 * the constraint inserted, in parallel; then greedily adds the constraint
 * (among the best ones on other values) that improves the best combination
 * further, up to o->max_edits constraints. Suggestions are the combination
 * and the single constraints (best per value) that reduce the objective,
 * best first (docs/advisor.md "Suggest"; the JSON is the advisor contract's). */

typedef enum sp_suggest_objective {
    SP_SUGGEST_TIME = 0, /* predicted step time */
    SP_SUGGEST_MEMORY    /* predicted per-device peak bytes */
} sp_suggest_objective;

/* "time", "memory"; false for another name. */
bool sp_suggest_objective_parse(const char *name, sp_suggest_objective *out);
const char *sp_suggest_objective_name(sp_suggest_objective o);

typedef struct sp_suggest_opts {
    sp_suggest_objective objective;
    uint32_t k;                /* suggestions at most, 1..100 (default 5) */
    const sp_profile *profile; /* NULL: sp_profile_default */
    uint32_t threads;          /* 0: online cores (at most 64) */
    uint32_t max_candidates;   /* constraints scored in the first round, 1..4096 (default 48) */
    uint32_t max_edits;        /* constraints in the greedy combination, 1..8 (default 3) */
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
 * apart by a leading '{'). On success *out is a new object freed with
 * sp_suggest_destroy (it may hold no suggestion). Errors: CM_EINVAL for bad
 * options (err->path "/k", "/max_candidates", "/max_edits", "/objective",
 * "/threads"), those of reading and planning the input itself (LINE:COL or a
 * JSON Pointer), CM_ENOMEM; *out is NULL then. A candidate whose run fails
 * is skipped and counted. Thread contract: starts and joins its own threads;
 * reentrant. */
cm_status sp_suggest_run(const char *text, size_t len, const sp_suggest_opts *o, sp_suggest **out,
                         cm_error *err);
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
 * given, i.e. the module a client gets by sending the edits to what-if.
 * Errors: CM_EINVAL for a bad i, those of sp_whatif_edit_text, CM_ENOMEM. */
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

/* `shardplan suggest FILE [--objective time|memory] [-k N] [--profile NAME|FILE]
 * [--threads T] [--max-candidates N] [--max-edits N] [--check [--iters K]] [--json]`;
 * argv[0] is the command. --check measures the input and the top suggestion
 * with bench (NULL: --check is refused) and prints measured against predicted
 * step times. Returns an exit status (2 for bad usage). */
int sp_suggest_main(int argc, char **argv, FILE *out, FILE *errs, sp_suggest_bench_fn bench);

/* ---- what-if ----------------------------------------------------------------
 * Edits of a module in the advisor contract's terms (docs/advisor.md
 * "What-if"): value references (VREF) name a function input, output or op
 * result by the plan document's op path; edits add or remove a sharding
 * constraint or propagation barrier, set or clear a user sharding (with
 * priorities), or set an op's or a custom call target's sharding rule.
 * sp_whatif_run propagates the original, applies the edits, re-propagates
 * only the region the edits can reach (bounded by tensors whose sharding
 * cannot change: every dimension closed) with the rest held at the original
 * fixed point, and diffs every value's sharding and the cost before/after.
 * The incremental result equals a full re-propagation of the edited module;
 * modules where the region argument does not hold (while/case/if, manual or
 * named computations, sharding groups, edits that change the set of user
 * priorities) are re-propagated in full and say so (region.ops = total_ops). Thread contract: objects are used by one thread
 * at a time; runs on different inputs may proceed in parallel. */

typedef enum sp_vref_kind { SP_VREF_INPUT = 0, SP_VREF_OUTPUT, SP_VREF_OP } sp_vref_kind;

/* A value reference. Strings are owned by the list that holds the edit. */
typedef struct sp_vref {
    sp_vref_kind kind;
    const char *function; /* NULL: "main" (else the module's first function) */
    uint32_t index;       /* input or output number */
    const char *op;       /* SP_VREF_OP: the plan document's op path, "/ops/5" */
    uint32_t result;      /* SP_VREF_OP: result number */
} sp_vref;

typedef enum sp_edit_kind {
    SP_EDIT_CONSTRAIN = 0, /* insert sdy.sharding_constraint on value */
    SP_EDIT_UNCONSTRAIN,   /* remove the sdy.sharding_constraint at op */
    SP_EDIT_SET_SHARDING,  /* set (sharding NULL: clear) the user sharding of value */
    SP_EDIT_BARRIER,       /* insert sdy.propagation_barrier on value */
    SP_EDIT_UNBARRIER,     /* remove the sdy.propagation_barrier at op */
    SP_EDIT_RULE,          /* set the sharding rule of op */
    SP_EDIT_CUSTOM_RULE,   /* set the rule of every custom_call to target */
    SP_EDIT_N_KINDS
} sp_edit_kind;

/* "constrain", "unconstrain", ...; false / "?" when unknown. */
const char *sp_edit_kind_name(sp_edit_kind k);
bool sp_edit_kind_parse(const char *name, sp_edit_kind *out);

typedef struct sp_edit {
    sp_edit_kind kind;
    sp_vref value;            /* constrain, set_sharding, barrier */
    const char *op;           /* unconstrain, unbarrier, rule: op path */
    const char *sharding;     /* constrain, set_sharding: `<@mesh, [...]>`, NULL: clear */
    const char *direction;    /* barrier: BOTH, FORWARD, BACKWARD or NONE */
    const char *rule;         /* rule, custom_rule: `([i, k], [k, j])->([i, j])`, JAX's
                               * einsum-like `i k, k j -> i j`, or Shardy's rule text */
    const char *target;       /* custom_rule: call_target_name */
    const char **reduction;   /* rule, custom_rule: reduction factor names; NULL: the
                               * factors that appear in operands only */
    uint32_t n_reduction;
    const char **need_replication; /* rule, custom_rule: need-replication factor names */
    uint32_t n_need_replication;
    char path[32];            /* JSON Pointer of the edit, "/edits/0", prefix of errors */
} sp_edit;

/* A list of edits; strings live in its arena. */
typedef struct sp_edit_list {
    sp_edit *items; /* heap */
    uint32_t n, cap;
    cm_arena arena;
} sp_edit_list;

void sp_edit_list_init(sp_edit_list *l);
void sp_edit_list_fini(sp_edit_list *l);
/* Appends an edit (strings copied); its path becomes "/edits/N". Errors: CM_ENOMEM. */
cm_status sp_edit_list_add(sp_edit_list *l, const sp_edit *e, cm_error *err);
/* Decodes JSON edits and appends them: an array of edits, {"edits":[...]} or
 * one edit object. A VREF is an object or its text form. Errors: CM_EINVAL
 * with the JSON Pointer of the bad member ("/edits/0/value/op"), CM_ENOMEM. */
cm_status sp_edit_list_decode(sp_edit_list *l, const char *json, size_t len, cm_error *err);
/* Decodes a what-if request body {"edits":[...], "save":bool, "profile":"NAME"}:
 * appends the edits, sets *save and copies the profile name (or "") into
 * profile[profile_len]. Errors as sp_edit_list_decode ("/save", "/profile"). */
cm_status sp_whatif_request_decode(const char *json, size_t len, sp_edit_list *l, bool *save,
                                   char *profile, size_t profile_len, cm_error *err);
/* Parses the CLI text form of a VREF: `in:N`, `out:N`, `/ops/5`, `/ops/5#1`,
 * with an optional `@fn:` prefix; strings go to a. Errors: CM_EINVAL (path ""). */
cm_status sp_vref_parse_text(const char *text, cm_arena *a, sp_vref *out, cm_error *err);
/* Appends the contract's JSON of a VREF / an edit. */
void sp_vref_write_json(const sp_vref *v, cm_buf *b);
void sp_edit_write_json(const sp_edit *e, cm_buf *b);

/* Reads len bytes of MLIR text or graph document (a leading '{'), applies the
 * edits (all paths resolve against the input as given) and appends the
 * edited module, before propagation, as MLIR to mlir. A graph document's
 * custom-call rules become `sdy.sharding_rule` attributes so that the text
 * stands alone. Errors: reading (LINE:COL or JSON Pointer), CM_EINVAL with
 * the edit's path for a bad edit, CM_ENOMEM. */
cm_status sp_whatif_edit_text(const char *text, size_t len, const sp_edit_list *edits,
                              cm_buf *mlir, cm_error *err);

typedef struct sp_whatif_opts {
    const sp_profile *profile; /* NULL: sp_profile_default */
    bool full;                 /* re-propagate the whole edited module (for comparison) */
    bool keep_propagated;      /* keep the edited module after propagation as MLIR text */
    bool no_cost;              /* skip partitioning and costing (benchmarks) */
} sp_whatif_opts;

void sp_whatif_opts_init(sp_whatif_opts *o);

/* One value whose sharding the edits changed. Strings are owned by the sp_whatif. */
typedef struct sp_whatif_change {
    sp_vref value;
    const char *label;  /* "%arg0", "%x" (graph name), "result 0 of /ops/5 (stablehlo.add)" */
    const char *before; /* `<@mesh, [...]>` or NULL (no sharding) */
    const char *after;
} sp_whatif_change;

typedef struct sp_whatif_stats {
    uint32_t region_ops; /* ops re-propagated (== total_ops after a full re-propagation) */
    uint32_t total_ops;  /* ops propagation considers in the edited module */
    bool incremental;    /* the region was used */
    const char *why_full;/* why not, when !incremental ("" otherwise) */
    double incremental_s;/* import passes, region, propagation and export of the edited module */
    double import_s;     /* of which the import passes */
    double region_s;     /* matching the original and finding the region */
    double propagate_s;  /* the propagation itself */
    double copy_s;       /* the original's shardings copied outside the region */
    double export_s;     /* the export passes */
} sp_whatif_stats;

typedef struct sp_whatif sp_whatif;

/* Runs the what-if on len bytes of MLIR text or graph document. On success
 * *out is freed with sp_whatif_destroy. Errors: reading, a bad edit
 * (CM_EINVAL with "/edits/N/..."), propagation, CM_ENOMEM; *out is NULL then. */
cm_status sp_whatif_run(const char *text, size_t len, const sp_edit_list *edits,
                        const sp_whatif_opts *o, sp_whatif **out, cm_error *err);
void sp_whatif_destroy(sp_whatif *w);

uint32_t sp_whatif_n_changed(const sp_whatif *w);
const sp_whatif_change *sp_whatif_changed_at(const sp_whatif *w, uint32_t i);
const sp_whatif_stats *sp_whatif_get_stats(const sp_whatif *w);
/* Cost of the original and of the edited module (zeroed with no_cost). */
const sp_cost_summary *sp_whatif_cost_before(const sp_whatif *w);
const sp_cost_summary *sp_whatif_cost_after(const sp_whatif *w);
/* The edited module before propagation (MLIR), borrowed; and after
 * propagation when keep_propagated was set ("" otherwise). */
const char *sp_whatif_mlir(const sp_whatif *w, size_t *len_out);
const char *sp_whatif_propagated(const sp_whatif *w, size_t *len_out);

/* Appends the contract's JSON answer (plan_id > 0 adds "plan_id") / a text report. */
void sp_whatif_write_json(const sp_whatif *w, int64_t plan_id, cm_buf *b);
void sp_whatif_write_text(const sp_whatif *w, cm_buf *b);

/* `shardplan whatif FILE --edit JSON [--edit JSON...] [--edits FILE] [--profile P]
 * [--full] [--json] [--mlir]`; argv[0] is the command. --mlir prints the edited
 * module instead of the report. Returns an exit status (2 for bad usage). */
int sp_whatif_main(int argc, char **argv, FILE *out, FILE *errs);

#endif /* SP_ADVISE_H */
