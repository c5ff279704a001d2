/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-propagation-pipeline, which chains Shardy's import passes
 * (sp_import.h), user-priority propagation (sp_prop.h) and the export passes
 * (sp_export.h); this header includes all three, so callers of any pass
 * around propagation need only this one. The pipeline lives in
 * propagation/sp_propagation_pipeline.c, as Shardy's does. Each pass edits
 * the module in place. Thread contract: one module per call. */
#ifndef SP_PIPELINE_H
#define SP_PIPELINE_H

#include "cm.h"
#include "sp_diag.h"
#include "sp_export.h"
#include "sp_import.h"
#include "sp_ir.h"
#include "sp_prop.h"

/* -sdy-propagation-pipeline. With o->shardy_pipeline, exactly Shardy's
 * composition (propagation_pipeline.cc): its import pipeline, the call
 * graph flattened and calls imported as named computations (or, with
 * o->dedup_functions_fully, function data-flow edges), sharding constraints
 * and groups, pre-ordered functions, user-priority propagation, the calls
 * and the call graph restored, reshards for call conflicts, and its export
 * pipeline (constraints become reshards; see sp_propagation_pipeline.c for
 * the export steps not yet run). Without it, the planner's composition: the
 * import passes, the manual-axes cleanup and the data-flow edges,
 * user-priority propagation, the edges sunk into their owners, and the
 * export passes, leaving calls, constraints and function shardings' sub-axes
 * as they are.
 * In both, propagation runs at user priority (with op-priority and
 * aggressive propagation inside); o->level is ignored.
 * Errors: those of the passes and of sp_propagate; the first failure stops
 * the rest. */
cm_status sp_pass_propagation_pipeline(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                       cm_error *err);

#endif /* SP_PIPELINE_H */
