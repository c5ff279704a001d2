/* SPDX-License-Identifier: Apache-2.0
 * planner: the advisor's what-if. Edits of a module in the advisor contract's
 * terms (docs/advisor.md "What-if"): value references (VREF) name a function
 * input, output or op result by the plan document's op path; edits add or
 * remove a sharding constraint or propagation barrier, set or clear a user
 * sharding (with priorities), or set an op's or a custom call target's
 * sharding rule. sp_whatif_run propagates the original, applies the edits,
 * re-propagates only the region the edits can reach (bounded by tensors
 * whose sharding cannot change: every dimension closed) with the rest held
 * at the original fixed point, and diffs every value's sharding and the cost
 * before/after. The incremental result equals a full re-propagation of the
 * edited module; modules where the region argument does not hold
 * (while/case/if, manual or named computations, sharding groups, edits that
 * change the set of user priorities) are re-propagated in full and say so
 * (region.ops = total_ops). The command is cmd/cmd_whatif.c.
 * Ownership: sp_whatif_run returns a heap object freed by sp_whatif_destroy;
 * an sp_edit_list owns its edits' strings. Thread contract: objects are used
 * by one thread at a time; runs on different inputs may proceed in parallel. */
#ifndef SP_WHATIF_H
#define SP_WHATIF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_input.h"

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

/* Reads len bytes of MLIR text or graph document (a leading '{') through the
 * input loader (planner/doc/sp_input.h) with in_opts' rules document and
 * limits (NULL: the defaults; nothing is propagated), applies the edits (all
 * paths resolve against the input as given) and appends the edited module,
 * before propagation, as MLIR to mlir. The custom-call rules in force (a
 * graph document's, or the rules document's for MLIR) become
 * `sdy.sharding_rule` attributes so that the text stands alone. Errors:
 * reading (LINE:COL or JSON Pointer, /rules... for the rules document),
 * CM_EINVAL with the edit's path for a bad edit, CM_ENOMEM. */
cm_status sp_whatif_edit_text(const char *text, size_t len, const sp_input_opts *in_opts,
                              const sp_edit_list *edits, cm_buf *mlir, cm_error *err);

typedef struct sp_whatif_opts {
    const sp_profile *profile; /* NULL: sp_profile_default */
    bool full;                 /* re-propagate the whole edited module (for comparison) */
    bool keep_propagated;      /* keep the edited module after propagation as MLIR text */
    bool no_cost;              /* skip partitioning and costing (benchmarks) */
    /* Polled between the phases (reading, importing, each propagation, each
     * costing): true stops the what-if, which then fails with CM_EIO
     * ("stopped"). NULL: never stops. */
    bool (*cancel)(void *ctx);
    void *cancel_ctx;
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

/* Runs the what-if on len bytes of MLIR text or graph document, read as
 * sp_whatif_edit_text reads it, both the original and the edited module
 * propagated with in_opts' pass and rules (NULL: sp_input_opts_init's
 * defaults, -sdy-propagation-pipeline; propagate and record_edges are not
 * used): the pipeline as its import passes, the (regional) propagation and
 * its export passes, another pass as propagation alone at its level, as the
 * plan was made. On success *out is freed with sp_whatif_destroy. Errors:
 * CM_EINVAL at /options/pass for an unknown pass, reading, a bad edit
 * (CM_EINVAL with "/edits/N/..."), propagation, CM_ENOMEM; *out is NULL then. */
cm_status sp_whatif_run(const char *text, size_t len, const sp_input_opts *in_opts,
                        const sp_edit_list *edits, const sp_whatif_opts *o, sp_whatif **out,
                        cm_error *err);
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

#endif /* SP_WHATIF_H */
