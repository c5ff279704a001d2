/* SPDX-License-Identifier: Apache-2.0
 * planner: the one input loader. Every consumer of a model (the plan writer,
 * cost, lint, collectives, suggest, what-if, compare, the executor's worker,
 * the CLI and the server) turns its input into a module here: MLIR text or a
 * graph document (told apart by a leading '{'), with the custom rules of a
 * separate rules document when the text cannot carry them (MLIR), and, unless
 * the module is already partitioned, the chosen propagation pass run with
 * sharding origins recorded and sharding rules kept. A stored plan is loaded
 * the same way from the input and options the server stored with it, so every
 * consumer sees the module the plan describes.
 * Ownership: sp_input_read fills caller storage released by sp_input_fini.
 * Thread contract: one sp_input per thread; the loader keeps no state. */
#ifndef SP_INPUT_H
#define SP_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_rules.h"
#include "sp_diag.h"

/* The propagation a plan runs (Shardy's pass names, sp_plan_pass_name). */
typedef enum sp_plan_pass {
    SP_PLAN_PIPELINE = 0, /* -sdy-propagation-pipeline (default) */
    SP_PLAN_USER_PRIORITY,
    SP_PLAN_OP_PRIORITY,
    SP_PLAN_AGGRESSIVE,
    SP_PLAN_BASIC,
    SP_PLAN_N_PASSES
} sp_plan_pass;

/* Parses a pass name ("sdy-propagation-pipeline", with or without leading
 * dashes); false when unknown. */
bool sp_plan_pass_parse(const char *name, sp_plan_pass *out);
/* The Shardy name of pass p, without dashes. */
const char *sp_plan_pass_name(sp_plan_pass p);

typedef struct sp_input_opts {
    sp_plan_pass pass;             /* run unless the module is partitioned */
    bool propagate;                /* false: read only (the plan writer propagates itself) */
    bool record_edges;             /* also record edge source shardings (plan documents) */
    const char *rules;             /* a graph document whose custom_rules apply, or NULL */
    size_t rules_len;
    const sp_graph_limits *limits; /* for graph documents; NULL: the defaults */
    const cm_cancel *cancel;       /* polled while propagating (sp_prop_opts.cancel); NULL:
                                    * never */
} sp_input_opts;

/* Fills o with the defaults: the propagation pipeline, propagate, no rules. */
void sp_input_opts_init(sp_input_opts *o);

typedef struct sp_input {
    sp_module *m;                  /* owned (through g when g is set) */
    sp_graph *g;                   /* graph document, or NULL for MLIR */
    sp_graph *rules_g;             /* owned: the decoded opts.rules, or NULL */
    const sp_custom_rules *custom; /* the rules in force (g's, else rules_g's), may be NULL */
    bool functions_form;           /* plan paths /functions/F/ops/I (else /ops/I) */
    bool partitioned;              /* the input already had explicit collectives */
    bool propagated;               /* the pass ran */
    uint32_t n_diags;              /* propagation diagnostics (warnings, errors) */
} sp_input;

/* True when the first non-blank byte of s is '{' (a graph document). */
bool sp_input_looks_json(const char *s, size_t len);

/* Reads len bytes of text (need not be NUL-terminated) into in and, with
 * o->propagate, plans it. o NULL: sp_input_opts_init's defaults. Errors: those
 * of decoding (CM_EINVAL with a JSON Pointer, or "LINE:COL" for MLIR), of the
 * rules document (CM_EINVAL at /rules...), of propagation, CM_ENOMEM; in is
 * zeroed then. */
cm_status sp_input_read(const char *text, size_t len, const sp_input_opts *o, sp_input *in,
                        cm_error *err);
/* Verifies m, read from MLIR (and imported, for GSPMD input), as
 * sp_input_read does: CM_EINVAL with the first error at "LINE:COL", or
 * CM_ENOMEM. For the readers that import a module their own way (migrate). */
cm_status sp_input_verify_mlir(sp_module *m, cm_error *err);
/* The same from the file at path ("-" for stdin); CM_EIO when unreadable. */
cm_status sp_input_load(const char *path, const sp_input_opts *o, sp_input *in, cm_error *err);
/* Runs pass on m with the plan's recording options (origins, rules kept;
 * edge sources with record_edges), adding Shardy's diagnostics to d;
 * propagation polls cancel (may be NULL) and stops with CM_EIO once it says
 * stop. */
cm_status sp_input_propagate(sp_module *m, sp_plan_pass pass, const sp_custom_rules *custom,
                             bool record_edges, const cm_cancel *cancel, sp_diags *d,
                             cm_error *err);
/* Partitions m in place as Shardy's export does before SPMD lowering:
 * -sdy-insert-explicit-reshards, then -sdy-reshard-to-collectives, whatever m
 * holds (whether it is partitioned already is the caller's question; see
 * sp_module_is_partitioned). The one partitioning of the tree: the input
 * loader, the advisors and the executor all call it. Errors: those of the
 * two passes, CM_ENOMEM. */
cm_status sp_module_partition(sp_module *m, cm_error *err);
/* Partitions in's module (sp_module_partition) unless it is already
 * partitioned; in->partitioned is then true. Errors: those of
 * sp_module_partition. */
cm_status sp_input_partition(sp_input *in, cm_error *err);
void sp_input_fini(sp_input *in);

#endif /* SP_INPUT_H */
