/* SPDX-License-Identifier: Apache-2.0
 * planner: GSPMD (HLO) shardings, the `mhlo.sharding` strings XLA and JAX
 * print ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", and the V3 named
 * form), read and written as XLA's HloSharding text, and converted to a
 * Shardy mesh and sdy shardings the way XLA's Shardy import
 * (-xla-sdy-import-shardings) does it, and back the way its export does;
 * the module passes of XLA's Shardy import/export (GSPMD's and the sdy
 * round trip's shard_maps, the xla.sdy frontend attributes) and the
 * building blocks of the GSPMD -> Shardy migration report.
 * Ownership: parsed and converted objects live in the arena the caller
 * passes. Thread contract: reentrant; objects are not locked. */
#ifndef SP_GSPMD_H
#define SP_GSPMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_diag.h"
#include "sp_ir.h"
#include "sp_shard.h"

#define SP_HLO_MAX_DIMS    64        /* tile assignment and iota reshape dims */
#define SP_HLO_MAX_DEVICES (1 << 20) /* devices of one tile assignment */
#define SP_HLO_MAX_TUPLE   4096      /* elements of a tuple sharding */

typedef enum sp_hlo_kind {
    SP_HLO_REPLICATED = 0, /* {replicated} */
    SP_HLO_MANUAL,         /* {manual} */
    SP_HLO_UNKNOWN,        /* {unknown} */
    SP_HLO_MAXIMAL,        /* {maximal device=N} */
    SP_HLO_TILED,          /* {devices=[...]...} */
    SP_HLO_TUPLE,          /* {{...}, {...}} */
    SP_HLO_NAMED           /* V3: {mesh['a'=2], [{'a'}, {}], replicated={...}} */
} sp_hlo_kind;

/* The kind of a trailing tile dimension (last_tile_dims={...}). */
typedef enum sp_hlo_subgroup {
    SP_HLO_SUB_REPLICATED = 0,
    SP_HLO_SUB_MANUAL,
    SP_HLO_SUB_UNREDUCED
} sp_hlo_subgroup;

typedef struct sp_hlo_sharding sp_hlo_sharding;

/* One HLO sharding. A tiled sharding's tile assignment has n_dims dims: the
 * tensor's rank, then one per subgroup (last_tile_dim_replicate counts as a
 * replicated subgroup, kept apart as replicate_last, as XLA does). Its
 * devices are an iota (n_reshape > 0: iota(product) reshaped to reshape,
 * transposed by perm, reshaped to dims; kept canonical as XLA keeps it) or
 * an explicit list (devices, row-major over dims). */
struct sp_hlo_sharding {
    sp_hlo_kind kind;
    int64_t device; /* SP_HLO_MAXIMAL */
    bool single_device; /* SP_HLO_MAXIMAL written as V3's {single_device[device_id=N]} */
    int64_t *dims;  /* SP_HLO_TILED: tile assignment dims */
    uint32_t n_dims;
    int64_t *reshape; /* iota reshape dims, or NULL */
    int32_t *perm;    /* iota transpose, n_reshape entries */
    uint32_t n_reshape;
    int64_t *devices;    /* explicit device list, or NULL */
    int64_t n_devices;   /* product of dims */
    bool replicate_last; /* last_tile_dim_replicate */
    uint8_t *subgroups;  /* last_tile_dims={...}: sp_hlo_subgroup each */
    uint32_t n_subgroups;
    sp_hlo_sharding *elems; /* SP_HLO_TUPLE */
    uint32_t n_elems;
    sp_sharding *named;  /* SP_HLO_NAMED: on its inlined mesh (named->mesh) */
    sp_axis_ref *manual; /* SP_HLO_NAMED: the manual={...} axes */
    uint32_t n_manual;
    bool named_all;    /* SP_HLO_NAMED without dims: `replicated` or `manual` */
    bool named_manual; /* ... and it is `manual` */
};

/* Parses the HLO sharding text of len bytes (need not be NUL-terminated),
 * every form XLA prints: {replicated}, {manual}, {unknown}, {maximal
 * device=N}, {devices=[d,...]<=[r,...]T(p,...)} and explicit device lists,
 * last_tile_dim_replicate, last_tile_dims={manual, replicated, unreduced},
 * metadata={...} (skipped), tuples {{...}, {...}} with XLA's index comments,
 * and the V3 (named) forms {mesh['a'=2,'b'=2], device_ids=(...), [{'a', ?},
 * {}], replicated={'b'}, unreduced={...}, manual={...}}, {mesh[...],
 * replicated|manual}, {single_device[device_id=N]}. The
 * result is normalised as XLA normalises it (a tile assignment that
 * replicates everything is {replicated}, one that is all manual is
 * {manual}, an explicit list that is an iota becomes the iota). Errors:
 * CM_EINVAL with err->path "col N" (1-based, in text), CM_ENOMEM. */
cm_status sp_hlo_sharding_parse(const char *text, size_t len, cm_arena *a, sp_hlo_sharding **out,
                                cm_error *err);

/* Appends XLA's HLO sharding V3 text (NamedSharding) of sdy sharding s on
 * mesh, with the n_manual manual axes: `{mesh['a'=2,'b'=2], [{'a'}, {?}],
 * replicated={'b'}}`, `{single_device[device_id=N]}` for a maximal mesh,
 * `{mesh['a'=2], manual}` when every axis is manual and no dim is sharded,
 * `{mesh['a'=2], replicated}` for a rank-0 one without replicated axes,
 * and with simplify `{mesh[], replicated}` for a fully replicated one. */
void sp_hlo_v3_print(const sp_sharding *s, const sp_mesh *mesh, const sp_axis_ref *manual,
                     uint32_t n_manual, bool simplify, cm_buf *b);

/* Appends XLA's text of s (HloSharding::ToString without metadata). */
void sp_hlo_sharding_print(const sp_hlo_sharding *s, cm_buf *b);

/* The device at linear index i of a tiled sharding's tile assignment. */
int64_t sp_hlo_sharding_device(const sp_hlo_sharding *s, int64_t i);

/* The common factor sequence of two shapes (XLA's
 * ExtractCommonFactorSequence): the sizes that split both a and b at every
 * boundary of either, ones skipped. Writes up to cap sizes; returns the
 * count, 0 when there is none (a factor does not divide the other). */
uint32_t sp_hlo_common_factors(const int64_t *a, uint32_t na, const int64_t *b, uint32_t nb,
                               int64_t *out, uint32_t cap);

/* The local mesh of a tiled sharding (XLA's AnalyzeTileAssignment): the axis
 * sizes its iota tile assignment decomposes into, major to minor. Writes up
 * to SP_HLO_MAX_DIMS sizes to sizes_out and the count to *n_out. Errors:
 * CM_EINVAL when the tile assignment is not an iota whose dims share factors
 * with its transposed reshape dims (XLA cannot convert it either). */
cm_status sp_hlo_local_mesh(const sp_hlo_sharding *s, int64_t *sizes_out, uint32_t *n_out,
                            cm_error *err);

/* Converts the non-tuple s to an sdy sharding of rank dims on global (named
 * mesh_name), as XLA's import does: maximal shardings go to the mesh named
 * maximal_name (rank 0, closed), replicated, manual and unknown ones are
 * all-empty dims (open for unknown or open_dims), and a tiled one maps each
 * local mesh axis to the global axes or sub-axes it spans; a V3 (named)
 * one is its own sharding on mesh_name (the name its mesh was given). Errors:
 * CM_EINVAL (local mesh incompatible with global), CM_ENOMEM. */
cm_status sp_hlo_to_sdy(const sp_hlo_sharding *s, const sp_mesh *global, const char *mesh_name,
                        const char *maximal_name, uint32_t rank, bool open_dims, cm_arena *a,
                        sp_sharding **out, cm_error *err);

/* Converts sdy sharding s on mesh (the mesh s names) to an HLO sharding, as
 * XLA's export does: tile dims per tensor dim, then manual (the n_manual
 * axes named), unreduced and replicated subgroups, over an iota of the mesh
 * axes (split into the sub-axes s uses). A mesh without axes gives
 * {maximal device=N} or {replicated}. Errors: CM_EINVAL (unknown axis, a
 * mesh with explicit device ids the iota cannot express), CM_ENOMEM. */
cm_status sp_hlo_from_sdy(const sp_sharding *s, const sp_mesh *mesh, const char *const *manual,
                          uint32_t n_manual, cm_arena *a, sp_hlo_sharding **out, cm_error *err);

/* ---- module passes ------------------------------------------------------------ */

/* True when m carries GSPMD shardings and no sdy mesh: an `mhlo.sharding`
 * string on a function argument, result or op, or a `@Sharding` custom
 * call. */
bool sp_gspmd_detect(const sp_module *m);

/* -xla-sdy-import-shardings: collects every `mhlo.sharding` of m, builds the
 * global mesh @mesh (axes "_axis_N" from the common factors of the local
 * meshes) and @single_device_N meshes for maximal shardings, and replaces
 * each `mhlo.sharding` with the equivalent `sdy.sharding`. Errors: CM_EINVAL
 * at "LINE:COL" of the op (a function's for its arguments and results) for
 * a sharding that does not parse or cannot be converted; CM_ENOMEM. */
cm_status sp_gspmd_import_shardings(sp_module *m, cm_error *err);

/* The import the input loader runs on a detected GSPMD module:
 * sp_gspmd_import_shardings, sp_gspmd_manual_import, then the remaining
 * @Sharding custom calls become sdy.sharding_constraint (unspecified_dims
 * opened), then sp_gspmd_open_while_free_vars. Errors as those. */
cm_status sp_gspmd_import(sp_module *m, cm_error *err);

/* XLA's -xla-sdy-stablehlo-import-pipeline (and -xla-sdy-mhlo-import-
 * pipeline, the same steps): custom calls with tuple operands or a tuple
 * result are flattened (a stablehlo.tuple operand becomes its elements,
 * get_tuple_element users read the matching new result; nested tuples are
 * left as they are), then sp_gspmd_import with the global mesh's axes named
 * "axis_N" as those pipelines name them, @xla.sdy.ShardingGroup calls become
 * sdy.sharding_group, and the constants sdy.constant. Errors as
 * sp_gspmd_import, CM_EINVAL for a bad sharding group call. */
cm_status sp_gspmd_stablehlo_import_pipeline(sp_module *m, cm_error *err);

/* -xla-sdy-round-trip-shard-map-import: each call of a
 * `...xla.sdy.manual_computation_body...` function between
 * @xla.sdy.GlobalToLocalShape and @xla.sdy.LocalToGlobalShape custom calls
 * (JAX's shard_map, with its in/out shardings and manual axes in their
 * mhlo.frontend_attributes) becomes an sdy.manual_computation holding a copy
 * of the body, nested ones nested; the body functions are removed. Errors:
 * CM_EINVAL at the call's LINE:COL (also added to d, when not NULL, with the
 * "failed to legalize" error XLA's conversion adds), CM_ENOMEM. */
cm_status sp_gspmd_shard_map_import(sp_module *m, sp_diags *d, cm_error *err);

/* -xla-sdy-open-while-free-vars-sharding: for every stablehlo.while, each
 * value defined outside it and used inside that has a sharding (not of rank
 * 0, not already fully open) goes through a fully open sdy.sharding_constraint
 * placed before the while, so propagation may shard it freely inside, as
 * XLA's import pipelines do. Errors: CM_ENOMEM. */
cm_status sp_gspmd_open_while_free_vars(sp_module *m, cm_error *err);

/* -xla-sdy-import-constants: every stablehlo.constant becomes an
 * sdy.constant (which Shardy's import splits per use), as XLA's pipelines
 * do before Shardy runs. Cannot fail; err is unused. */
cm_status sp_gspmd_import_constants(sp_module *m, cm_error *err);

/* -xla-sdy-round-trip-shard-map-export: each sdy.manual_computation (inner
 * ones first) becomes a call of a new function `xla.sdy.manual_computation_
 * body[_N]` holding its body, between @xla.sdy.GlobalToLocalShape and
 * @xla.sdy.LocalToGlobalShape custom calls that carry the in and out
 * shardings and the manual axes as xla.sdy frontend attributes (the inverse
 * of sp_gspmd_shard_map_import). Errors: CM_EINVAL at a computation whose
 * body does not end in sdy.return, CM_ENOMEM. */
cm_status sp_gspmd_shard_map_export(sp_module *m, cm_error *err);

/* -xla-sdy-round-trip-clone-manual-computation-calls: every call of a
 * shard_map body function after the first calls a copy of it of its own
 * (named as MLIR's symbol table names it, `body_N`), so each body belongs
 * to one manual computation. Errors: CM_EINVAL for a call of a function the
 * module lacks, CM_ENOMEM. */
cm_status sp_gspmd_clone_manual_computation_calls(sp_module *m, cm_error *err);

/* GSPMD's shard_map: a call of a `...shmap_body...` function whose operands
 * come through @Sharding and @SPMDFullToShardShape custom calls and whose
 * results go through @Sharding and @SPMDShardToFullShape becomes an
 * sdy.manual_computation (in/out shardings those of the outer custom calls,
 * manual axes every axis they use), as XLA's shard_map import does; run
 * after sp_gspmd_import_shardings. Errors: CM_EINVAL at the call's LINE:COL
 * when the pattern is broken, CM_ENOMEM. */
cm_status sp_gspmd_manual_import(sp_module *m, cm_error *err);

/* True when m carries the sdy round trip's attributes (a module frontend
 * attribute `xla.sdy.meshes`): a jax.export artifact or an XLA dump. */
bool sp_gspmd_detect_round_trip(const sp_module *m);

/* The sdy round trip's import, as XLA's -xla-sdy-round-trip-import-pipeline
 * does it for StableHLO: the meshes of `xla.sdy.meshes` become sdy.mesh ops,
 * `xla.sdy.sharding` frontend attributes the shardings of arguments,
 * @Sharding calls, python callbacks and send/recv/after_all (others are
 * dropped, as XLA drops them, and so is every mhlo.sharding),
 * @xla.sdy.FuncResultSharding the func result shardings, `xla.sdy.
 * sharding_rule` the op's rule; then @Sharding becomes
 * sdy.sharding_constraint, @xla.sdy.ShardingGroup sdy.sharding_group, and
 * the shard_maps manual computations (sp_gspmd_shard_map_import). With
 * hlo_sharding_v3 (XLA's enable-hlo-sharding-v3) the shardings are V3
 * mhlo.sharding text instead: those of arguments, results and the ops above
 * are imported (sp_gspmd_import_shardings), the others dropped; the meshes
 * are not lifted and deduplicated across axis names as XLA does. Errors:
 * CM_EINVAL at the
 * LINE:COL of the op or function whose attribute does not parse, CM_ENOMEM. */
cm_status sp_gspmd_round_trip_import(sp_module *m, bool hlo_sharding_v3, sp_diags *d,
                                     cm_error *err);

/* The options of XLA's -xla-sdy-round-trip-import-pipeline. */
typedef struct sp_gspmd_round_trip_opts {
    bool constant_import;         /* enable-constant-import (XLA's default: on) */
    bool hlo_sharding_v3;         /* enable-hlo-sharding-v3 */
    bool lift_and_dedup_meshes;   /* lift-and-dedup-meshes: inlined meshes become symbols */
    bool only_uninlineable_calls; /* import-only-uninlineable-func-calls (default on); off:
                                   * every func call becomes an sdy.named_computation */
    bool closed_result_constraints; /* the pipeline of XLA's that still had that option
                                     * (commit eeb950ea): a FuncResultSharding kept as a
                                     * constraint keeps its closed dims (newer XLA opens
                                     * them) */
} sp_gspmd_round_trip_opts;

/* XLA's round-trip import pipeline: custom-call tuples flattened, then
 * sp_gspmd_round_trip_import, the constants imported, and as o says the
 * inlined meshes lifted and the func calls imported (o NULL: XLA's
 * defaults). Errors as sp_gspmd_round_trip_import, CM_ENOMEM. */
cm_status sp_gspmd_round_trip_import_pipeline(sp_module *m, const sp_gspmd_round_trip_opts *o,
                                              sp_diags *d, cm_error *err);

/* -xla-sdy-import-sdy-custom-calls: each @Sharding custom call with an sdy
 * sharding (the xla.sdy.sharding frontend attribute, or sdy.sharding once
 * imported) becomes sdy.sharding_constraint, and each @xla.sdy.ShardingGroup
 * sdy.sharding_group (its xla.sdy.sharding_group_id the group). Errors:
 * CM_EINVAL at the call's LINE:COL for a group call without an id or whose
 * result is used (also added to d, when not NULL, after the "failed to
 * legalize" error XLA's conversion adds), CM_ENOMEM. */
cm_status sp_gspmd_import_sdy_custom_calls(sp_module *m, sp_diags *d, cm_error *err);

/* -xla-sdy-stablehlo-export-shardings: replaces each `sdy.sharding` of a
 * function argument, result and op with its `mhlo.sharding` string and
 * removes the sdy.mesh symbols. Errors: CM_EINVAL at the op, CM_ENOMEM. */
cm_status sp_gspmd_export_shardings(sp_module *m, cm_error *err);

/* The options of XLA's export (-xla-sdy-stablehlo-export-pipeline). */
typedef struct sp_gspmd_export_opts {
    bool hlo_sharding_v3;     /* write V3 text: {mesh['a'=2], [{'a'}, {}]} */
    bool simplify_replicated; /* V3: a fully replicated sharding is {mesh[], replicated} */
    bool control_flow;        /* a while, case or if without a sharding gets a replicated one */
} sp_gspmd_export_opts;

/* sp_gspmd_export_shardings with options (o NULL: the defaults, V2 text),
 * and the module's sdy.parameters_shardings / sdy.output_shardings written
 * as mhlo.spmd_parameters_shardings / mhlo.spmd_output_sharding. */
cm_status sp_gspmd_export(sp_module *m, const sp_gspmd_export_opts *o, cm_error *err);

/* XLA's -xla-sdy-stablehlo-export-pipeline: an sdy.all_reduce whose operand
 * has unreduced axes becomes a fully manual computation around a
 * stablehlo.all_reduce (XLA's export of manual reduction collectives; its
 * forms of a reduce_scatter of unreduced axes and of sharded/replicated-to-
 * unreduced are not done: those ops are an error);
 * sdy.reshard, sharding constraints and the explicit collectives become
 * mhlo.copy ops with their (out) sharding, except a reshard between a
 * maximal sharding and none or a fully replicated one, which gives way to
 * its operand, as does any other all_reduce (XLA's export-ops); manual
 * computations XLA's partitioner pattern (mhlo.copy, @SPMDFullToShardShape,
 * a call of a private `xla.sdy.inlinable_manual_computation_body` function,
 * mhlo.copy, @SPMDShardToFullShape, their shardings with the manual axes as
 * manual subgroups), then sp_gspmd_export with o and control_flow set (as
 * XLA's pipeline adds a sharding to control flow without one), and used
 * python callbacks with one result return a one-element tuple. Not done
 * here: XLA's call-graph unflattening. Errors: CM_EINVAL at the op,
 * CM_ENOMEM. */
cm_status sp_gspmd_stablehlo_export_pipeline(sp_module *m, const sp_gspmd_export_opts *o,
                                             cm_error *err);

/* -xla-sdy-round-trip-export-ops: sdy.constant becomes stablehlo.constant,
 * sdy.sharding_constraint a @Sharding custom call with the sharding as its
 * sdy.sharding, sdy.sharding_group a side-effecting @xla.sdy.ShardingGroup
 * call (frontend attribute xla.sdy.sharding_group_id = "N : i64") and
 * sdy.propagation_barrier an @xla.sdy.PropagationBarrier call (frontend
 * attribute xla.sdy.allowed_direction = "N : i32", Shardy's enum value).
 * Errors: CM_ENOMEM. */
cm_status sp_gspmd_round_trip_export_ops(sp_module *m, cm_error *err);

/* -xla-sdy-round-trip-export-shardy-attrs: each sdy sharding of a function
 * argument and op is also saved, as its text escaped the way XLA escapes it
 * (a backslash before each quote), in the `xla.sdy.sharding` frontend
 * attribute; each func result with one returns through an
 * @xla.sdy.FuncResultSharding call holding it; sharding rules move to
 * `xla.sdy.sharding_rule`; the meshes are listed in the module's
 * `xla.sdy.meshes`. With hlo_sharding_v3 only the rules move. The sdy
 * attributes stay for the sharding export. Errors: CM_ENOMEM. */
cm_status sp_gspmd_round_trip_export_attrs(sp_module *m, bool hlo_sharding_v3, cm_error *err);

/* XLA's -xla-sdy-round-trip-export-pipeline: inlined meshes lifted (unless
 * keep_meshes_inlined), sp_gspmd_round_trip_export_ops,
 * sp_gspmd_shard_map_export, sp_gspmd_round_trip_export_attrs, then
 * sp_gspmd_export (V3 text with hlo_sharding_v3). XLA also deduplicates
 * meshes of the same devices first; that step is not done here. Errors as
 * those passes. */
cm_status sp_gspmd_round_trip_export_pipeline(sp_module *m, bool keep_meshes_inlined,
                                              bool hlo_sharding_v3, cm_error *err);

/* What XLA's StableHLO -> HLO -> StableHLO conversion keeps of m (the step
 * between export and import in -xla-sdy-round-trip-testing-pipeline), as a
 * model: argument attributes other than the sharding, frontend attributes,
 * layout mode and memory kind go, and result ones other than the sharding,
 * layout and memory kind; an op keeps its inherent attributes, mhlo.sharding
 * and mhlo.frontend_attributes; a custom call gets backend_config = "" and,
 * with several results, the tuple's HLO shape as xla_shape; a one-result
 * function's result without a sharding takes that of the op it returns (the
 * HLO ROOT); constants used
 * in while/if/case regions are sunk into them; every function but @main is
 * renamed NAME.N (N counting them in module order, as the ids XLA's builder
 * appends to called computations; XLA's ids may differ in larger modules).
 * Not modelled: mhlo ops come back as they are (XLA's converter brings them
 * back as stablehlo), free variables of loops stay free (XLA lifts them
 * into the loop state and the import's canonicalizer drops them again),
 * unreachable functions stay. Errors: CM_ENOMEM. */
cm_status sp_gspmd_hlo_round_trip(sp_module *m, cm_error *err);

/* XLA's -xla-sdy-unflatten-call-graph: points each func.call at one
 * function per computation, as Shardy's -sdy-unflatten-call-graph does (the
 * same origin, sdy.original_func_name or xla.sdy.original_func_name, and
 * manual axes, and unless dedup_fully the same argument and result
 * shardings; fully deduplicating, the callee whose shardings are called
 * most often), then makes every call agree with its callee: an operand not
 * sharded as the callee's argument goes through an mhlo.copy to it, the call
 * takes the callee's result shardings and a result sharded otherwise before
 * gets an mhlo.copy back to its own (copies inside manual computations carry
 * the call's xla.sdy.manual_axes). Calls of xla.sdy.inlinable_manual_computation_body
 * functions are left alone; the functions lose their origin and manual-axes
 * attributes. Errors: CM_EINVAL at a call whose callee is missing or does
 * not match it, CM_ENOMEM. */
cm_status sp_gspmd_unflatten_call_graph(sp_module *m, bool dedup_fully, cm_error *err);

/* ---- the migration report's building blocks ---------------------------------------- */

/* Reduces m, a module as GSPMD left it (mhlo.sharding on every op), to the
 * annotations a user wrote: the shardings of function arguments and results
 * and of @Sharding calls (which become constraints); every other op's
 * sharding is dropped. The mesh is built from all of the module's shardings,
 * so it is the one sp_gspmd_import gives the whole module. Propagating the
 * result is what Shardy does from GSPMD's starting point. Errors as
 * sp_gspmd_import. */
cm_status sp_gspmd_import_user_annotations(sp_module *m, cm_error *err);

/* One value whose sharding differs. */
typedef struct sp_gspmd_divergence {
    uint32_t op;               /* the op (same id in both modules) */
    uint32_t result;           /* its result number */
    const sp_sharding *gspmd;  /* GSPMD's, or NULL */
    const sp_sharding *shardy; /* Shardy's, or NULL */
} sp_gspmd_divergence;

/* Compares, op result by op result in program order, the shardings of
 * gspmd (the module imported with sp_gspmd_import) and shardy (the same
 * text through sp_gspmd_import_user_annotations and propagation): two
 * shardings differ when they place data differently (per-dim axes or
 * unreduced axes; closedness and priorities aside; no sharding and a fully
 * replicated one alike). Ops added by propagation are skipped. *out (free
 * with cm_free) lists the divergences, first first. Errors: CM_ENOMEM. */
cm_status sp_gspmd_divergences(const sp_module *gspmd, sp_module *shardy, sp_gspmd_divergence **out,
                               uint32_t *n_out, cm_error *err);

#endif /* SP_GSPMD_H */
