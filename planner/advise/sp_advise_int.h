/* SPDX-License-Identifier: Apache-2.0
 * planner, private to the advisor room: the scan of a graph document for Flax
 * logical axis names that no logical_axis_rules entry maps (sp_lint_json.c,
 * the only lint file that sees jansson), and the helpers the advisor's
 * modules share (sp_advise_common.c). */
#ifndef SP_ADVISE_INT_H
#define SP_ADVISE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_graph_json.h"
#include "sp_shard.h"

typedef struct sp_logical_miss {
    const char *logical; /* the unmatched logical name (arena) */
    const char *value;   /* the value that carries it: input/result/output name, or "" */
    const char *path;    /* JSON Pointer of the logical_axes member (arena) */
    uint32_t dim;        /* dimension that stays replicated */
} sp_logical_miss;

/* Scans a graph document for logical_axes entries (inputs, op results,
 * outputs, sharding objects with "logical") whose name has no rule. Results
 * go to *out (n_out entries), allocated in a. A document that is not JSON or
 * has no logical_axes gives 0 entries. Errors: CM_ENOMEM. */
cm_status sp_advise_logical_scan(const char *text, size_t len, cm_arena *a, sp_logical_miss **out,
                                 uint32_t *n_out, cm_error *err);

/* ---- shared by lint, sweep, suggest, what-if and compare (sp_advise_common.c) ---- */

/* Appends s as a JSON string (cm_json_put_str), NULL as "" where
 * cm_json_put_cstr writes null. */
void sp_advise_put_jstr(cm_buf *b, const char *s);
/* Whom a fix applies to, for its JAX spelling. Strings are borrowed from
 * the module or graph. */
typedef struct sp_advise_target {
    const char *name;    /* the graph document's name, else the MLIR location's; NULL: none */
    int32_t input;       /* its index when an input of a public top-level function, else -1 */
    const char *logical; /* such an input's Flax logical axes (compact JSON array), or NULL */
    const sp_sharding *current; /* its sharding now, to find the dim a fix changes; NULL: none */
} sp_advise_target;

/* The target of value v of m (g, the graph document's names, may be NULL);
 * current is v's sharding in m. */
void sp_advise_target_of(const sp_module *m, const sp_graph *g, uint32_t v, sp_advise_target *t);

/* Appends the fix for a value named token: `sdy.sharding_constraint TOKEN
 * <@mesh, [{"a"}, {}]>` to shardy, for s (NULL: replicated, on mesh_name)
 * with dimension d replaced by axes[0..n) (d = SP_NONE: s as is), over rank
 * dimensions; and to jax the same in JAX's terms for target t (may be NULL):
 * for a function input its `in_shardings` entry (`in_shardings for
 * layer0.W1 (input 0): NamedSharding(mesh, P('a', None))`), for a Flax
 * parameter first the `logical_axis_rules` entry (or the
 * `nn.with_logical_partitioning` names) that gives it, for any other value
 * `jax.lax.with_sharding_constraint(NAME, NamedSharding(mesh, P('a', None)))`
 * (NAME `x` when the value has no name). */
void sp_advise_fix_write(const sp_sharding *s, const char *mesh_name, uint32_t rank, uint32_t d,
                         const char *const *axes, uint32_t n, const char *token,
                         const sp_advise_target *t, cm_buf *shardy, cm_buf *jax);
/* Runs fn(arg) on n_threads threads (the caller's included, at most 64) and
 * joins them; fn pulls its own work (an atomic counter in arg). */
void sp_advise_threads_run(void *(*fn)(void *), void *arg, uint32_t n_threads);

/* The one way the advisor and compare cost a plan: unless partitioned is
 * already true, -sdy-insert-explicit-reshards and -sdy-reshard-to-collectives
 * on m (edited in place), then sp_cost_compute in explicit mode with profile
 * (NULL: the default), overlap (< 0: the profile's), custom rules and graph
 * names (both may be NULL). *out is a new sp_cost (NULL on error). Errors:
 * those of the passes and the cost model. */
cm_status sp_advise_partition_cost(sp_module *m, bool partitioned, const sp_profile *profile,
                                   double overlap, const sp_custom_rules *custom,
                                   const sp_graph *g, sp_cost **out, cm_error *err);

/* The module's main mesh: the first `sdy.mesh` with an axis of size > 1,
 * else the first; NULL when it declares none. */
const char *sp_advise_main_mesh(const sp_module *m);

#endif /* SP_ADVISE_INT_H */
