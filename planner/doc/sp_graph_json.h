/* SPDX-License-Identifier: Apache-2.0
 * planner: the JSON graph document (docs/graph-format.md) that training
 * pipelines send: meshes, functions with typed and optionally sharded inputs,
 * StableHLO/sdy ops with attributes and regions, outputs, Flax logical axis
 * rules and custom-call partitioning rules. sp_graph_decode turns it into an
 * sp_module built through the IR API with the attribute names and kinds the
 * MLIR reader produces, so a JSON document and the MLIR text of the same
 * module plan identically.
 * Errors name the failing member as an RFC 6901 JSON Pointer in err->path
 * ("/ops/12/operands/1") and say what was expected; no input makes the decoder
 * crash or abort. Ownership: an sp_graph owns its module and its custom-rule
 * table until sp_graph_destroy. Thread contract: a graph is used by one thread
 * at a time; decoding different documents in parallel is safe. */
#ifndef SP_GRAPH_JSON_H
#define SP_GRAPH_JSON_H

#include "cm.h"
#include "sp_ir.h"
#include "sp_rules.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Size limits enforced while decoding (docs/graph-format.md, "Limits"). */
typedef struct sp_graph_limits {
    size_t max_bytes;    /* document size, bytes (default 1 GiB) */
    uint32_t max_ops;    /* ops in the whole document, nested ones included (default 16M) */
    uint32_t max_values; /* inputs + results + block arguments (default 32M) */
    uint32_t max_rank;   /* tensor rank (default SP_MAX_RANK = 64) */
    int64_t max_dim;     /* largest dimension size (default 2^40) */
    int64_t max_elems;   /* elements of one tensor, product of dims (default 2^48) */
    uint32_t max_depth;  /* nesting of regions (default 32) */
} sp_graph_limits;

typedef struct sp_graph sp_graph;

/* Fills l with the defaults above. */
void sp_graph_limits_init(sp_graph_limits *l);

/* Decodes a graph document of len bytes (need not be NUL-terminated). lim may
 * be NULL for the defaults. On success *out is a new graph the caller frees
 * with sp_graph_destroy. Errors: CM_EINVAL with err->path the JSON Pointer of
 * the offending member (empty for a JSON syntax error, whose message carries
 * line and column), CM_ENOMEM; *out is NULL then. */
cm_status sp_graph_decode(const char *text, size_t len, const sp_graph_limits *lim,
                          sp_graph **out, cm_error *err);

/* Frees the graph, its module and its rules; NULL is a no-op. */
void sp_graph_destroy(sp_graph *g);

/* The decoded module, borrowed: valid until sp_graph_destroy. Passes may edit it. */
sp_module *sp_graph_module(const sp_graph *g);

/* The custom partitioning rules of the document (never NULL, possibly empty),
 * borrowed like the module. */
const sp_custom_rules *sp_graph_custom_rules(const sp_graph *g);

/* True when the document listed its functions under "functions"; false for
 * the single-function form (top-level "inputs", "ops", "outputs"). */
bool sp_graph_has_functions(const sp_graph *g);

/* The name the document gave value v (without '%'), or NULL. Borrowed. */
const char *sp_graph_value_name(const sp_graph *g, uint32_t v);
/* Every value name by value id (NULL entries for unnamed values), *n_out of
 * them; borrowed, valid while g lives (sp_cost_opts.value_names). */
const char *const *sp_graph_value_names(const sp_graph *g, uint32_t *n_out);
/* The Flax logical axis names function input v was given ("logical_axes"),
 * as a compact JSON array (`["batch",null]`), or NULL. Borrowed. */
const char *sp_graph_value_logical_axes(const sp_graph *g, uint32_t v);
/* Appends such names (json as sp_graph_value_logical_axes gives it) as the
 * Python tuple Flax spells: `('embed', None)`, `('batch',)`. */
void sp_graph_logical_axes_py(const char *json, cm_buf *b);

#endif /* SP_GRAPH_JSON_H */
