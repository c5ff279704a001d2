/* SPDX-License-Identifier: Apache-2.0
 * planner: meshes, tensor shardings and op sharding rules as Shardy defines
 * them (sharding_representation.md, sdy_dialect.md), with parsers and
 * printers that produce Shardy's text byte for byte, and verifiers.
 * Ownership: parsed objects live in the arena the caller passes; nothing here
 * frees. Thread contract: functions are reentrant; objects are not locked. */
#ifndef SP_SHARD_H
#define SP_SHARD_H

#include "cm.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- meshes ---------------------------------------------------------------- */

typedef struct sp_mesh_axis {
    const char *name; /* NUL-terminated, arena-owned */
    int64_t size;     /* > 0 */
} sp_mesh_axis;

/* `<["a"=2, "b"=4], device_ids=[...]>`; the empty mesh has n_axes = 0 and may
 * carry one device id (the maximal mesh `<[], device_ids=[3]>`). */
typedef struct sp_mesh {
    sp_mesh_axis *axes;  /* ordered, major to minor */
    uint32_t n_axes;
    int64_t *device_ids; /* NULL when the order is the default iota */
    uint32_t n_device_ids;
} sp_mesh;

/* ---- shardings --------------------------------------------------------------- */

/* An axis reference: a full axis ("x", pre_size = 0) or a sub-axis
 * "x":(pre_size)size, where pre_size is the product of the sizes of the
 * sub-axes of x that are more major than this one. */
typedef struct sp_axis_ref {
    const char *name;
    int64_t pre_size; /* 0 for a full axis, else >= 1 */
    int64_t size;     /* sub-axis size; for a full axis the mesh size (0 if unresolved) */
} sp_axis_ref;

typedef struct sp_dim_sharding {
    sp_axis_ref *axes; /* major to minor */
    uint32_t n_axes;
    bool is_closed;    /* closed: `{"a"}`; open: `{"a", ?}` */
    int32_t priority;  /* -1 when none, else the N of `pN` */
} sp_dim_sharding;

/* How the partial values along the unreduced axes combine. Shardy prints the
 * default (sum) as a bare `unreduced={...}`; the others as `unreduced=max{...}`
 * and `unreduced=min{...}`. */
typedef enum sp_reduction_kind {
    SP_REDUCTION_SUM = 0,
    SP_REDUCTION_MAX,
    SP_REDUCTION_MIN,
} sp_reduction_kind;

/* `#sdy.sharding<@mesh, [{"a"}, {?}], replicated={"b"}, unreduced={"c"}>`.
 * The mesh is named by symbol, or inlined (mesh_name NULL, mesh set).
 * `reduction` is the kind of the unreduced axes (sum when zeroed). */
typedef struct sp_sharding {
    const char *mesh_name;  /* symbol without '@', or NULL when inlined */
    sp_mesh *mesh;          /* the inlined mesh, or NULL when named */
    sp_dim_sharding *dims;
    uint32_t rank;
    sp_axis_ref *replicated;
    uint32_t n_replicated;
    sp_axis_ref *unreduced;
    uint32_t n_unreduced;
    sp_reduction_kind reduction;
} sp_sharding;

/* ---- op sharding rules ----------------------------------------------------- */

/* The factors of one tensor dimension: several for a compound dim ([ij]). */
typedef struct sp_dim_mapping {
    uint32_t *factors;
    uint32_t n_factors;
} sp_dim_mapping;

typedef struct sp_tensor_mapping {
    sp_dim_mapping *dims;
    uint32_t rank;
} sp_tensor_mapping;

typedef enum sp_factor_kind {
    SP_FACTOR_PASS_THROUGH = 0,
    SP_FACTOR_REDUCTION,
    SP_FACTOR_NEED_REPLICATION,
    SP_FACTOR_PERMUTATION
} sp_factor_kind;

/* `#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=8, j=8, k=16}
 *  reduction={j} need_replication={} permutation={} blocked_propagation={}, custom>` */
typedef struct sp_rule {
    uint32_t n_factors;
    int64_t *factor_sizes;        /* n_factors entries */
    uint8_t *factor_kind;         /* n_factors sp_factor_kind entries */
    uint8_t *factor_blocked;      /* n_factors booleans: blocked_propagation */
    sp_tensor_mapping *operands;
    uint32_t n_operands;
    sp_tensor_mapping *results;
    uint32_t n_results;
    bool is_custom;               /* `, custom` */
    /* The special factor lists as written (reduction, need_replication,
     * permutation, blocked_propagation; indices, possibly unsorted, repeated
     * or out of range), kept by sp_rule_parse_ex for the verifier's checks;
     * NULL and 0 for rules built in code or parsed by sp_rule_parse. */
    const int64_t *listed[4];
    uint32_t n_listed[4];
} sp_rule;

/* ---- text codecs -------------------------------------------------------------
 * Parsers take the text of the attribute *body*, i.e. what follows the
 * attribute name: for a sharding, `<@mesh, [{"a"}, {}]>`; for a mesh,
 * `<["a"=2]>`; for a rule `<([i])->([i]) {i=2}>`. text need not be
 * NUL-terminated; *consumed_out (may be NULL) receives the bytes read.
 * Errors are CM_EINVAL with err->path = "col N" relative to text, unless the
 * caller's reader rewrites it. */

cm_status sp_mesh_parse(const char *text, size_t len, cm_arena *a, sp_mesh **out,
                        size_t *consumed_out, cm_error *err);
cm_status sp_sharding_parse(const char *text, size_t len, cm_arena *a, sp_sharding **out,
                            size_t *consumed_out, cm_error *err);
cm_status sp_rule_parse(const char *text, size_t len, cm_arena *a, sp_rule **out,
                        size_t *consumed_out, cm_error *err);

/* ---- parse notes ---------------------------------------------------------------
 * MLIR reports a failed nested parse as the innermost error followed by one
 * error per enclosing level ("failed to parse Sdy_TensorSharding parameter
 * 'dim_shardings' ..."), and some errors do not stop the parse at all. The
 * _ex parsers record those further errors as notes, in the order MLIR emits
 * them, next to the one error err carries (the innermost fatal one). A note's
 * position is line 0 and col = 1-based byte offset into text (as err's "col
 * N"); the MLIR reader rewrites both to the file's LINE:COL. Notes beyond
 * SP_PARSE_NOTES_MAX are dropped; messages are truncated to fit. */
#define SP_PARSE_NOTES_MAX 12

typedef struct sp_parse_note {
    uint32_t line, col;
    char msg[192];
} sp_parse_note;

typedef struct sp_parse_notes {
    sp_parse_note items[SP_PARSE_NOTES_MAX];
    uint32_t n;
    bool quiet; /* the error is one Shardy's verifier reports: no enclosing-level errors */
} sp_parse_notes;

/* Appends a note (notes may be NULL: then nothing happens). */
void sp_parse_notes_add(sp_parse_notes *notes, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* As sp_mesh_parse and sp_sharding_parse, with Shardy's messages and the
 * enclosing-level errors recorded in notes (may be NULL). */
cm_status sp_mesh_parse_ex(const char *text, size_t len, cm_arena *a, sp_mesh **out,
                           size_t *consumed_out, sp_parse_notes *notes, cm_error *err);
cm_status sp_sharding_parse_ex(const char *text, size_t len, cm_arena *a, sp_sharding **out,
                               size_t *consumed_out, sp_parse_notes *notes, cm_error *err);
/* Parses a rule as Shardy's parser does, checking only its syntax and the
 * order of the factor-size dict: what Shardy's verifier checks (factor
 * indices in range, reuse within a tensor, the special lists sorted, unique
 * and disjoint) is left to sp_module_verify, which must accept the rule
 * before anything else reads it; mapped factor indices past UINT32_MAX are
 * stored as UINT32_MAX. sp_rule_parse is this plus those checks (with the
 * special lists folded into factor_kind / factor_blocked only). */
cm_status sp_rule_parse_ex(const char *text, size_t len, cm_arena *a, sp_rule **out,
                           size_t *consumed_out, sp_parse_notes *notes, cm_error *err);

/* Printers append Shardy's exact text of the body (no `#sdy.sharding` prefix). */
void sp_mesh_print(const sp_mesh *m, cm_buf *b);
void sp_sharding_print(const sp_sharding *s, cm_buf *b);
void sp_axis_ref_print(const sp_axis_ref *r, cm_buf *b);
void sp_rule_print(const sp_rule *r, cm_buf *b);

/* Verifies s against its mesh (m is the mesh s names, or s->mesh) and a
 * tensor of the given rank and dims (dims may be NULL to skip the size
 * checks): unknown axis, axis used twice, bad sub-axis, rank mismatch.
 * On success, fills each axis ref's size for full axes. */
cm_status sp_sharding_verify(sp_sharding *s, const sp_mesh *m, uint32_t rank,
                             const int64_t *dims, cm_error *err);
cm_status sp_mesh_verify(const sp_mesh *m, cm_error *err);

/* Total devices of a mesh (product of axis sizes; 1 for the empty mesh). */
int64_t sp_mesh_size(const sp_mesh *m);
/* Index of the axis named name, or -1. */
int32_t sp_mesh_axis_index(const sp_mesh *m, const char *name);
/* Structural equality of meshes: the same axes (names and sizes, in order)
 * and the same explicit device_ids (a mesh without device_ids differs from
 * one that lists the iota order). Either may be NULL: two NULLs are equal, a
 * NULL and a mesh are not. Pure; safe from any thread. */
bool sp_mesh_equal(const sp_mesh *a, const sp_mesh *b);

/* Deep equality of shardings (same mesh name, dims, replicated, unreduced,
 * and the reduction kind of the unreduced axes; the kind is ignored when
 * there are no unreduced axes, since it then prints and means nothing). */
bool sp_sharding_equal(const sp_sharding *a, const sp_sharding *b);

/* Whether a and b name the same mesh: the same symbol, or (both inline)
 * equal meshes. */
bool sp_sharding_same_mesh_ref(const sp_sharding *a, const sp_sharding *b);

/* Whether s is fully open: every dimension open, without axes or priority,
 * and no replicated or unreduced axes. */
bool sp_sharding_is_fully_open(const sp_sharding *s);

/* Shardy's TensorShardingAttr::isEquivalent: two shardings that place no
 * data (NULL, or no dimension and no unreduced axes) are; otherwise the same
 * mesh, unreduced axes and per-dimension axes, openness and priorities
 * aside. */
bool sp_sharding_equivalent(const sp_sharding *a, const sp_sharding *b);
/* A fully open sharding of the given rank on mesh_name. */
sp_sharding *sp_sharding_open(cm_arena *a, const char *mesh_name, uint32_t rank);
/* Deep copy into arena a. */
sp_sharding *sp_sharding_clone(cm_arena *a, const sp_sharding *s);

/* ---- JAX custom_partitioning rules ------------------------------------------
 * Parses the einsum-like string that jax.experimental.custom_partitioning's
 * sharding_rule takes ("i j, j k -> i k", "... i, ... i -> ...", "(i j) k"),
 * with optional factor sizes for factors that appear only inside compound
 * dims, and the reduction/need_replication/permutation factor name lists,
 * into an sp_rule for operands and results of the given shapes.
 * operand_dims[i] has operand_ranks[i] entries (likewise results).
 * Errors name the offending position ("col 7: factor k is used twice in
 * operand 0") or the shape mismatch. */
typedef struct sp_einsum_opts {
    const char **reduction;         /* factor names */
    uint32_t n_reduction;
    const char **need_replication;
    uint32_t n_need_replication;
    const char **permutation;
    uint32_t n_permutation;
    const char **size_names;        /* factor_sizes={name: size} */
    const int64_t *sizes;
    uint32_t n_sizes;
} sp_einsum_opts;

cm_status sp_rule_from_einsum(const char *spec, const sp_einsum_opts *opts,
                              const int64_t *const *operand_dims, const uint32_t *operand_ranks,
                              uint32_t n_operands, const int64_t *const *result_dims,
                              const uint32_t *result_ranks, uint32_t n_results, cm_arena *a,
                              sp_rule **out, cm_error *err);

#endif /* SP_SHARD_H */
