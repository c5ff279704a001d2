/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan opt`, the sdy_opt-compatible driver. It accepts the
 * spellings of MLIR's opt tools (one or two dashes, `-pass='k=v k2=v2'`),
 * splits input at `// -----` lines, runs the passes in order, matches
 * `expected-*` comments with -verify-diagnostics, and prints each module. */
#include "cmd.h"

#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "sp_canonicalize.h"
#include "sp_collectives.h"
#include "sp_gspmd.h"
#include "sp_ir.h"
#include "sp_pipeline.h"
#include "sp_prop.h"
#include "sp_reshard.h"
#include "sp_rules.h"
#include "sp_diag.h"
#include "sp_mlir.h"

#define MAX_PASSES 32
#define MAX_OPTS   16

typedef struct pass_opt {
    char key[64];
    char value[128];
} pass_opt;

typedef struct pass_inv {
    const char *name; /* without dashes */
    pass_opt opts[MAX_OPTS];
    int n_opts;
    bool timing; /* -mlir-timing */
} pass_inv;

typedef cm_status (*pass_fn)(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err);

static const char *opt_value(const pass_inv *inv, const char *key)
{
    for (int i = 0; i < inv->n_opts; i++) {
        if (strcmp(inv->opts[i].key, key) == 0) {
            return inv->opts[i].value;
        }
    }
    return NULL;
}

static bool opt_bool(const pass_inv *inv, const char *key)
{
    const char *v = opt_value(inv, key);
    return v != NULL && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || v[0] == '\0');
}

static cm_status run_populate(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    sp_rule_opts o = {.conservative = opt_bool(inv, "conservative-propagation")};
    return sp_pass_populate_rules(m, &o, d, err);
}

static cm_status run_propagate(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err,
                               sp_prop_level level)
{
    sp_prop_opts o;
    sp_prop_opts_init(&o, level);
    o.conservative = opt_bool(inv, "conservative-propagation");
    o.keep_sharding_rules = opt_bool(inv, "keep-sharding-rules");
    o.debug_sharding_origins = opt_bool(inv, "debug-sharding-origins");
    o.debug_edge_source_sharding = opt_bool(inv, "debug-edge-source-sharding") ||
                                   opt_bool(inv, "debug-propagation-edge-sharding");
    const char *strat = opt_value(inv, "propagation-strategy");
    if (strat != NULL && strcmp(strat, "basic") == 0) {
        o.aggressive_strategy = false;
    }
    const char *rop = opt_value(inv, "run-op-priority-propagation");
    if (rop != NULL && strcmp(rop, "false") == 0) {
        o.run_op_priority = false;
    }
    return sp_propagate(m, &o, d, err);
}

static cm_status run_basic(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    return run_propagate(m, inv, d, err, SP_PROP_BASIC);
}

static cm_status run_aggressive(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    return run_propagate(m, inv, d, err, SP_PROP_AGGRESSIVE);
}

static cm_status run_op_priority(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    return run_propagate(m, inv, d, err, SP_PROP_OP_PRIORITY);
}

static cm_status run_user_priority(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    return run_propagate(m, inv, d, err, SP_PROP_USER_PRIORITY);
}

static cm_status run_pipeline(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    sp_prop_opts o;
    sp_prop_opts_init(&o, SP_PROP_USER_PRIORITY);
    o.conservative = opt_bool(inv, "conservative-propagation");
    o.keep_sharding_rules = opt_bool(inv, "keep-sharding-rules");
    o.debug_sharding_origins = opt_bool(inv, "debug-sharding-origins");
    o.debug_edge_source_sharding = opt_bool(inv, "debug-edge-source-sharding") ||
                                   opt_bool(inv, "debug-propagation-edge-sharding");
    o.timing = inv->timing;
    o.shardy_pipeline = true;
    o.dedup_functions_fully = opt_bool(inv, "dedup-functions-fully");
    o.avoid_export_for_partitioning = opt_bool(inv, "avoid-export-for-partitioning");
    return sp_pass_propagation_pipeline(m, &o, d, err);
}

#define SIMPLE_PASS(fn, call)                                                                      \
    static cm_status fn(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)             \
    {                                                                                              \
        (void)inv;                                                                                 \
        (void)d;                                                                                   \
        return call;                                                                               \
    }
SIMPLE_PASS(run_lift, sp_pass_lift_inlined_meshes(m, err))
static cm_status run_apply_constraints(sp_module *m, const pass_inv *inv, sp_diags *d,
                                       cm_error *err)
{
    (void)d;
    return sp_pass_apply_sharding_constraints_debug(
        m, opt_bool(inv, "debug-propagation-edge-sharding"), err);
}
SIMPLE_PASS(run_splitter, sp_pass_constant_splitter(m, err))
SIMPLE_PASS(run_group_import, sp_pass_sharding_group_import(m, d, err))
SIMPLE_PASS(run_remove_size_one, sp_pass_remove_size_one_axes(m, err))
SIMPLE_PASS(run_pre_order_funcs, sp_pass_pre_order_funcs(m, err))
SIMPLE_PASS(run_add_edges, sp_pass_add_data_flow_edges(m, err))
SIMPLE_PASS(run_manual_axes_cleanup, sp_pass_manual_axes_cleanup(m, d, err))
SIMPLE_PASS(run_add_func_edges, sp_pass_add_func_data_flow_edges(m, err))
SIMPLE_PASS(run_flatten_call_graph, sp_pass_flatten_call_graph(m, err))
SIMPLE_PASS(run_func_to_call, sp_pass_propagate_sharding_from_func_to_call(m, err))
SIMPLE_PASS(run_explicit_batching, sp_pass_explicit_gather_scatter_batching(m, err))
static cm_status run_import_pipeline(sp_module *m, const pass_inv *inv, sp_diags *d,
                                     cm_error *err)
{
    return sp_pass_import_pipeline(m, opt_bool(inv, "dedup-functions-fully"), d, err);
}
static cm_status run_import_func_calls(sp_module *m, const pass_inv *inv, sp_diags *d,
                                       cm_error *err)
{
    const char *key = "add-data-flow-edges-on-named-computations";
    bool add_edges = opt_value(inv, key) == NULL || opt_bool(inv, key);
    return sp_pass_import_func_calls(m, add_edges, d, err);
}
SIMPLE_PASS(run_remove_groups, sp_pass_remove_sharding_groups(m, err))
SIMPLE_PASS(run_merger, sp_pass_constant_merger(m, err))
SIMPLE_PASS(run_non_divisible, sp_pass_update_non_divisible_io(m, err))
SIMPLE_PASS(run_close, sp_pass_close_shardings(m, err))
SIMPLE_PASS(run_drop_rules, sp_pass_drop_sharding_rules(m, err))
SIMPLE_PASS(run_func_call_reshards, sp_pass_insert_func_call_reshards(m, err))
SIMPLE_PASS(run_export_named, sp_pass_export_named_computations(m, err))
static cm_status run_xla_export_named(sp_module *m, const pass_inv *inv, sp_diags *d,
                                      cm_error *err)
{
    (void)d;
    return sp_pass_xla_export_named_computations(m, opt_bool(inv, "dedup-functions-fully"), err);
}
SIMPLE_PASS(run_sink_func_edges, sp_pass_sink_func_data_flow_edges(m, err))
SIMPLE_PASS(run_propagate_to_results, sp_pass_propagate_to_func_results(m, err))
SIMPLE_PASS(run_drop_sharding_and_mesh, sp_pass_drop_sharding_and_mesh(m, err))
SIMPLE_PASS(run_remove_debug_info, sp_pass_remove_propagation_debug_info(m, err))
SIMPLE_PASS(run_constraint_to_reshard, sp_pass_sharding_constraint_to_reshard(m, err))
SIMPLE_PASS(run_remove_sub_axes, sp_pass_remove_sub_axes_in_io(m, err))
SIMPLE_PASS(run_remove_ag_rs, sp_pass_remove_ag_rs_for_cmv1(m, err))
SIMPLE_PASS(run_canonicalize, sp_pass_canonicalize(m, err))

static cm_status run_sink_edges(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    (void)d;
    cm_status st = sp_prop_debug_info_sink(m, opt_bool(inv, "sink-debug-sharding-origins"),
                                           opt_bool(inv, "sink-debug-propagation-edge-sharding"),
                                           err);
    return st != CM_OK ? st : sp_pass_sink_data_flow_edges(m, err);
}
SIMPLE_PASS(run_inline_meshes, sp_pass_inline_meshes(m, err))

static cm_status run_resolve_single_device(sp_module *m, const pass_inv *inv, sp_diags *d,
                                           cm_error *err)
{
    (void)d;
    const char *r = opt_value(inv, "replica-count"), *p = opt_value(inv, "partition-count");
    return sp_pass_resolve_single_device_sharding(m, r != NULL ? strtoll(r, NULL, 10) : 1,
                                                  p != NULL ? strtoll(p, NULL, 10) : 1, err);
}

static cm_status run_explicit_reshards(sp_module *m, const pass_inv *inv, sp_diags *d,
                                       cm_error *err)
{
    const char *v = opt_value(inv, "enable-full-version");
    sp_reshard_opts o = {.full_version = v == NULL || opt_bool(inv, "enable-full-version")};
    return sp_pass_insert_explicit_reshards(m, &o, d, err);
}

static cm_status run_reshard_to_collectives(sp_module *m, const pass_inv *inv, sp_diags *d,
                                            cm_error *err)
{
    (void)d;
    return sp_pass_reshard_to_collectives(m, opt_bool(inv, "keep-redundant-reshards"), err);
}
static cm_status run_unflatten(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    (void)d;
    return sp_pass_unflatten_call_graph(m, opt_bool(inv, "dedup-functions-fully"), err);
}
static cm_status run_xla_unflatten(sp_module *m, const pass_inv *inv, sp_diags *d,
                                  cm_error *err)
{
    (void)d;
    return sp_gspmd_unflatten_call_graph(m, opt_bool(inv, "dedup-functions-fully"), err);
}
SIMPLE_PASS(run_device_groups, sp_pass_annotate_device_groups(m, err))
SIMPLE_PASS(run_xla_import_shardings, sp_gspmd_import_shardings(m, err))
static cm_status run_xla_stablehlo_import(sp_module *m, const pass_inv *inv, sp_diags *d,
                                          cm_error *err)
{
    (void)inv;
    (void)d;
    return sp_gspmd_stablehlo_import_pipeline(m, err);
}
SIMPLE_PASS(run_xla_export_shardings, sp_gspmd_export_shardings(m, err))
SIMPLE_PASS(run_gspmd_user_annotations, sp_gspmd_import_user_annotations(m, err))
SIMPLE_PASS(run_xla_shard_map_export, sp_gspmd_shard_map_export(m, err))
SIMPLE_PASS(run_xla_import_constants, sp_gspmd_import_constants(m, err))
SIMPLE_PASS(run_xla_open_while_free_vars, sp_gspmd_open_while_free_vars(m, err))
static cm_status run_xla_export_pipeline(sp_module *m, const pass_inv *inv, sp_diags *d,
                                         cm_error *err)
{
    (void)d;
    sp_gspmd_export_opts o = {opt_bool(inv, "enable-hlo-sharding-v3"),
                              opt_bool(inv, "simplify-replicated-shardings"), true};
    return sp_gspmd_stablehlo_export_pipeline(m, &o, err);
}
SIMPLE_PASS(run_xla_clone_mc_calls, sp_gspmd_clone_manual_computation_calls(m, err))
static cm_status run_xla_round_trip_import(sp_module *m, const pass_inv *inv, sp_diags *d,
                                           cm_error *err)
{
    sp_gspmd_round_trip_opts o = {
        opt_value(inv, "enable-constant-import") == NULL || opt_bool(inv, "enable-constant-import"),
        opt_bool(inv, "enable-hlo-sharding-v3"), opt_bool(inv, "lift-and-dedup-meshes"),
        opt_value(inv, "import-only-uninlineable-func-calls") == NULL ||
            opt_bool(inv, "import-only-uninlineable-func-calls"),
        /* the option is that older pipeline's, and so are its constraints */
        opt_value(inv, "import-only-uninlineable-func-calls") != NULL};
    return sp_gspmd_round_trip_import_pipeline(m, &o, d, err);
}
static cm_status run_xla_rt_export(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    (void)d;
    return sp_gspmd_round_trip_export_pipeline(m, opt_bool(inv, "keep-meshes-inlined"),
                                               opt_bool(inv, "enable-hlo-sharding-v3"), err);
}
static cm_status run_xla_rt_export_attrs(sp_module *m, const pass_inv *inv, sp_diags *d,
                                         cm_error *err)
{
    (void)d;
    return sp_gspmd_round_trip_export_attrs(m, opt_bool(inv, "enable-hlo-sharding-v3"), err);
}
SIMPLE_PASS(run_xla_rt_export_ops, sp_gspmd_round_trip_export_ops(m, err))
SIMPLE_PASS(run_xla_hlo_round_trip, sp_gspmd_hlo_round_trip(m, err))
/* XLA's testing pipeline: export, the HLO conversion there and back, import */
static cm_status run_xla_rt_testing(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    bool v3 = opt_bool(inv, "enable-hlo-sharding-v3");
    cm_status st = sp_gspmd_round_trip_export_pipeline(m, false, v3, err);
    if (st == CM_OK) {
        st = sp_gspmd_hlo_round_trip(m, err);
    }
    return st == CM_OK ? run_xla_round_trip_import(m, inv, d, err) : st;
}
/* Shardy's clone of XLA's import (shardy/round_trip_import): the same
 * steps, and size-one axes removed */
static cm_status run_sdy_rt_import(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    cm_status st = run_xla_round_trip_import(m, inv, d, err);
    return st == CM_OK ? sp_pass_remove_size_one_axes(m, err) : st;
}
static cm_status run_xla_shard_map_import(sp_module *m, const pass_inv *inv, sp_diags *d,
                                          cm_error *err)
{
    (void)inv;
    return sp_gspmd_shard_map_import(m, d, err);
}
static cm_status run_xla_sdy_custom_calls(sp_module *m, const pass_inv *inv, sp_diags *d,
                                          cm_error *err)
{
    (void)inv;
    return sp_gspmd_import_sdy_custom_calls(m, d, err);
}
static cm_status run_pad_div(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    (void)inv;
    return sp_pass_pad_for_divisibility(m, d, err);
}
static cm_status run_verify_unreduced(sp_module *m, const pass_inv *inv, sp_diags *d,
                                     cm_error *err)
{
    (void)inv;
    return sp_pass_verify_unreduced_axes(m, d, err);
}
static cm_status run_export_pipeline(sp_module *m, const pass_inv *inv, sp_diags *d,
                                    cm_error *err)
{
    sp_export_opts o;
    sp_export_opts_init(&o);
    const char *r = opt_value(inv, "replica-count"), *p = opt_value(inv, "partition-count");
    o.replica_count = r != NULL ? strtoll(r, NULL, 10) : 1;
    o.partition_count = p != NULL ? strtoll(p, NULL, 10) : 1;
    o.avoid_export_for_partitioning = opt_bool(inv, "avoid-export-for-partitioning");
    o.enable_insert_explicit_collectives = opt_bool(inv, "enable-insert-explicit-collectives");
    o.remove_all_gather_reduce_scatter_for_cmv1 =
        opt_bool(inv, "remove-all-gather-reduce-scatter-for-cmv1");
    o.keep_sharding_rules = opt_bool(inv, "keep-sharding-rules");
    o.dump_sharding_origins = opt_bool(inv, "dump-sharding-origins");
    o.dump_propagation_edges = opt_bool(inv, "dump-propagation-edges");
    if (opt_value(inv, "update-non-divisible-input-output-shardings") != NULL) {
        o.update_non_divisible_input_output_shardings =
            opt_bool(inv, "update-non-divisible-input-output-shardings");
    }
    if (opt_value(inv, "inline-meshes") != NULL) {
        o.inline_meshes = opt_bool(inv, "inline-meshes");
    }
    o.enable_per_instruction_partitioning = opt_bool(inv, "enable-per-instruction-partitioning");
    o.per_instruction_partitioning_filter = opt_value(inv, "per-instruction-partitioning-filter");
    o.avoid_reshards_on_calls = opt_bool(inv, "avoid-reshards-on-calls");
    o.timing = inv->timing;
    return sp_pass_export_pipeline(m, &o, d, err);
}
static cm_status run_resolve_permutation(sp_module *m, const pass_inv *inv, sp_diags *d,
                                        cm_error *err)
{
    const char *h = opt_value(inv, "enable-halo-exchange");
    const char *r = opt_value(inv, "replica-count"), *p = opt_value(inv, "partition-count");
    sp_rpf_opts o = {h == NULL || opt_bool(inv, "enable-halo-exchange"),
                     r != NULL ? strtoll(r, NULL, 10) : 1, p != NULL ? strtoll(p, NULL, 10) : 1};
    return sp_pass_resolve_permutation_factors(m, &o, d, err);
}
static cm_status run_per_instruction(sp_module *m, const pass_inv *inv, sp_diags *d,
                                    cm_error *err)
{
    sp_pip_opts o;
    sp_pip_opts_init(&o);
    const char *r = opt_value(inv, "replica-count"), *p = opt_value(inv, "partition-count");
    o.filter = opt_value(inv, "filter");
    o.enable_halo_exchange = opt_value(inv, "enable-halo-exchange") == NULL ||
                             opt_bool(inv, "enable-halo-exchange");
    o.replica_count = r != NULL ? strtoll(r, NULL, 10) : 1;
    o.partition_count = p != NULL ? strtoll(p, NULL, 10) : 1;
    return sp_pass_per_instruction_partitioning(m, &o, d, err);
}
static cm_status run_g2l(sp_module *m, const pass_inv *inv, sp_diags *d, cm_error *err)
{
    const char *r = opt_value(inv, "replica-count"), *p = opt_value(inv, "partition-count");
    sp_g2l_opts o = {r != NULL ? strtoll(r, NULL, 10) : 1, p != NULL ? strtoll(p, NULL, 10) : 1,
                     opt_bool(inv, "enable-rgv3"), opt_bool(inv, "per-dim-all-gather"),
                     opt_bool(inv, "combine-multi-dimension-reduce-scatter")};
    return sp_pass_convert_global_to_local(m, &o, d, err);
}

typedef struct pass_def {
    const char *name;
    pass_fn fn;
    const char *const *options; /* allowed option keys */
} pass_def;

static const char *const populate_opts[] = {"conservative-propagation", NULL};

static const char *const basic_opts[] = {"keep-sharding-rules",
                                         "module-dump-directory",
                                         "conservative-propagation",
                                         "debug-sharding-origins",
                                         "debug-edge-source-sharding",
                                         "debug-propagation-edge-sharding",
                                         NULL};
static const char *const aggressive_opts[] = {"keep-sharding-rules",
                                              "module-dump-directory",
                                              "conservative-propagation",
                                              "debug-sharding-origins",
                                              "debug-edge-source-sharding",
                                              "debug-propagation-edge-sharding",
                                              "propagation-strategy",
                                              NULL};
static const char *const priority_opts[] = {"keep-sharding-rules",
                                            "module-dump-directory",
                                            "conservative-propagation",
                                            "debug-sharding-origins",
                                            "debug-edge-source-sharding",
                                            "debug-propagation-edge-sharding",
                                            "propagation-strategy",
                                            "run-op-priority-propagation",
                                            NULL};

static const char *const pipeline_opts[] = {"keep-sharding-rules",
                                            "module-dump-directory",
                                            "conservative-propagation",
                                            "debug-sharding-origins",
                                            "debug-edge-source-sharding",
                                            "debug-propagation-edge-sharding",
                                            "skip-inline",
                                            "dedup-functions-fully",
                                            "avoid-export-for-partitioning",
                                            NULL};

static const char *const apply_constraints_opts[] = {"debug-sharding-origins",
                                                     "debug-propagation-edge-sharding", NULL};
static const char *const sink_edges_opts[] = {"sink-debug-sharding-origins",
                                              "sink-debug-propagation-edge-sharding", NULL};

static const char *const explicit_reshards_opts[] = {"enable-full-version", NULL};

static const char *const reshard_to_collectives_opts[] = {"keep-redundant-reshards", NULL};
static const char *const unflatten_opts[] = {"dedup-functions-fully", NULL};
static const char *const import_func_calls_opts[] = {"add-data-flow-edges-on-named-computations",
                                                     NULL};
static const char *const xla_v3_opts[] = {"enable-hlo-sharding-v3", NULL};
static const char *const xla_rt_export_opts[] = {"keep-meshes-inlined", "enable-hlo-sharding-v3",
                                                 NULL};
static const char *const xla_rt_import_opts[] = {"enable-hlo-sharding-v3", "enable-constant-import",
                                                 "lift-and-dedup-meshes",
                                                 "import-only-uninlineable-func-calls", NULL};
static const char *const xla_export_opts[] = {"enable-hlo-sharding-v3",
                                              "simplify-replicated-shardings", NULL};
static const char *const device_count_opts[] = {"replica-count", "partition-count", NULL};
static const char *const g2l_opts[] = {"replica-count", "partition-count", "enable-rgv3",
                                       "per-dim-all-gather",
                                       "combine-multi-dimension-reduce-scatter", NULL};

static const char *const export_pipeline_opts[] = {
    "replica-count", "partition-count", "avoid-export-for-partitioning",
    "enable-insert-explicit-collectives", "remove-all-gather-reduce-scatter-for-cmv1",
    "keep-sharding-rules", "dump-sharding-origins", "dump-propagation-edges",
    "update-non-divisible-input-output-shardings", "inline-meshes",
    "enable-per-instruction-partitioning", "per-instruction-partitioning-filter",
    "avoid-reshards-on-calls", "dump-directory", NULL};

static const char *const rpf_opts[] = {"enable-halo-exchange", "replica-count",
                                       "partition-count", NULL};

static const char *const pip_opts[] = {"filter", "enable-halo-exchange", "replica-count",
                                       "partition-count", NULL};

static const pass_def passes[] = {
    {"sdy-populate-op-sharding-rules", run_populate, populate_opts},
    {"sdy-basic-propagate", run_basic, basic_opts},
    {"sdy-aggressive-propagate", run_aggressive, aggressive_opts},
    {"sdy-op-priority-propagate", run_op_priority, priority_opts},
    {"sdy-user-priority-propagate", run_user_priority, priority_opts},
    {"sdy-propagation-pipeline", run_pipeline, pipeline_opts},
    {"sdy-lift-inlined-meshes", run_lift, NULL},
    {"sdy-apply-sharding-constraints", run_apply_constraints, apply_constraints_opts},
    {"sdy-constant-or-scalar-splitter", run_splitter, NULL},
    {"sdy-sharding-group-import", run_group_import, NULL},
    {"sdy-remove-size-one-axes", run_remove_size_one, NULL},
    {"sdy-pre-order-funcs", run_pre_order_funcs, NULL},
    {"sdy-remove-sharding-groups", run_remove_groups, NULL},
    {"sdy-constant-or-scalar-merger", run_merger, NULL},
    {"sdy-update-non-divisible-input-output-shardings", run_non_divisible, NULL},
    {"sdy-close-shardings", run_close, NULL},
    {"sdy-drop-sharding-rules", run_drop_rules, NULL},
    {"sdy-insert-explicit-reshards", run_explicit_reshards, explicit_reshards_opts},
    {"sdy-reshard-to-collectives", run_reshard_to_collectives, reshard_to_collectives_opts},
    {"sdy-unflatten-call-graph", run_unflatten, unflatten_opts},
    {"sdy-insert-func-call-reshards", run_func_call_reshards, NULL},
    {"sdy-export-named-computations", run_export_named, NULL},
    {"sdy-sink-func-data-flow-edges", run_sink_func_edges, NULL},
    {"sdy-propagate-to-func-results", run_propagate_to_results, NULL},
    {"sdy-drop-sharding-and-mesh", run_drop_sharding_and_mesh, NULL},
    {"sdy-remove-propagation-debug-info", run_remove_debug_info, NULL},
    {"sdy-sharding-constraint-to-reshard", run_constraint_to_reshard, NULL},
    {"sdy-remove-sub-axes-in-input-output-shardings", run_remove_sub_axes, NULL},
    {"sdy-remove-all-gather-reduce-scatter-for-cmv1", run_remove_ag_rs, NULL},
    {"sdy-add-data-flow-edges", run_add_edges, NULL},
    {"sdy-manual-axes-cleanup", run_manual_axes_cleanup, NULL},
    {"sdy-import-func-calls", run_import_func_calls, import_func_calls_opts},
    {"sdy-add-func-data-flow-edges", run_add_func_edges, NULL},
    {"sdy-flatten-call-graph", run_flatten_call_graph, NULL},
    {"sdy-propagate-sharding-from-func-to-call", run_func_to_call, NULL},
    {"sdy-explicit-gather-scatter-batching", run_explicit_batching, NULL},
    {"sdy-import-pipeline", run_import_pipeline, unflatten_opts},
    {"sdy-sink-data-flow-edges", run_sink_edges, sink_edges_opts},
    {"sdy-inline-meshes", run_inline_meshes, NULL},
    {"sdy-resolve-single-device-sharding", run_resolve_single_device, device_count_opts},
    {"shardplan-annotate-device-groups", run_device_groups, NULL},
    {"xla-sdy-import-shardings", run_xla_import_shardings, NULL},
    {"xla-sdy-stablehlo-import-pipeline", run_xla_stablehlo_import, NULL},
    {"xla-sdy-mhlo-import-pipeline", run_xla_stablehlo_import, NULL},
    {"xla-sdy-stablehlo-export-shardings", run_xla_export_shardings, NULL},
    {"xla-sdy-round-trip-shard-map-import", run_xla_shard_map_import, NULL},
    {"xla-sdy-round-trip-import-pipeline", run_xla_round_trip_import, xla_rt_import_opts},
    {"xla-sdy-round-trip-shard-map-export", run_xla_shard_map_export, NULL},
    {"xla-sdy-round-trip-export-pipeline", run_xla_rt_export, xla_rt_export_opts},
    {"xla-sdy-round-trip-export-ops", run_xla_rt_export_ops, NULL},
    {"xla-sdy-round-trip-export-shardy-attrs", run_xla_rt_export_attrs, xla_v3_opts},
    {"xla-sdy-round-trip-stablehlo-to-hlo-to-stablehlo", run_xla_hlo_round_trip, NULL},
    {"xla-sdy-round-trip-testing-pipeline", run_xla_rt_testing, xla_v3_opts},
    {"sdy-round-trip-import-pipeline", run_sdy_rt_import, NULL},
    {"xla-sdy-import-constants", run_xla_import_constants, NULL},
    {"xla-sdy-import-sdy-custom-calls", run_xla_sdy_custom_calls, NULL},
    {"xla-sdy-open-while-free-vars-sharding", run_xla_open_while_free_vars, NULL},
    {"xla-sdy-stablehlo-export-pipeline", run_xla_export_pipeline, xla_export_opts},
    {"xla-sdy-round-trip-clone-manual-computation-calls", run_xla_clone_mc_calls, NULL},
    {"xla-sdy-export-named-computations", run_xla_export_named, unflatten_opts},
    {"xla-sdy-unflatten-call-graph", run_xla_unflatten, unflatten_opts},
    {"gspmd-user-annotations", run_gspmd_user_annotations, NULL},
    {"sdy-convert-global-to-local", run_g2l, g2l_opts},
    {"sdy-pad-for-divisibility", run_pad_div, NULL},
    {"canonicalize", run_canonicalize, NULL},
    {"sdy-verify-unreduced-axes", run_verify_unreduced, NULL},
    {"sdy-export-pipeline", run_export_pipeline, export_pipeline_opts},
    {"sdy-resolve-permutation-factors", run_resolve_permutation, rpf_opts},
    {"sdy-per-instruction-partitioning", run_per_instruction, pip_opts},
};

static const pass_def *find_pass(const char *name)
{
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        if (strcmp(passes[i].name, name) == 0) {
            return &passes[i];
        }
    }
    return NULL;
}

/* Parses "k=v k2=v2" (optionally wrapped in quotes or braces). */
static bool parse_pass_opts(const char *s, pass_inv *inv, FILE *errs)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    char *p = buf;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == '\'' || p[n - 1] == '"' || p[n - 1] == '}')) {
        p[--n] = '\0';
    }
    while (*p == '\'' || *p == '"' || *p == '{') {
        p++;
    }
    /* tokens split at spaces outside quotes; a quoted part (`filter='a, b'`,
     * its closing quote possibly stripped above) is kept without its quotes */
    char *rd = p;
    for (;;) {
        while (*rd == ' ') {
            rd++;
        }
        if (*rd == '\0') {
            break;
        }
        char *tok = rd, *wr = rd, quote = '\0';
        for (; *rd != '\0' && (quote != '\0' || *rd != ' '); rd++) {
            if (quote == '\0' && (*rd == '\'' || *rd == '"')) {
                quote = *rd;
            } else if (quote != '\0' && *rd == quote) {
                quote = '\0';
            } else {
                *wr++ = *rd;
            }
        }
        if (*rd != '\0') {
            rd++;
        }
        *wr = '\0';
        if (inv->n_opts >= MAX_OPTS) {
            fprintf(errs, "shardplan opt: too many options for -%s\n", inv->name);
            return false;
        }
        char *eq = strchr(tok, '=');
        pass_opt *o = &inv->opts[inv->n_opts++];
        o->value[0] = '\0';
        if (eq != NULL) {
            *eq = '\0';
            size_t vl = strlen(eq + 1);
            vl = vl < sizeof o->value ? vl : sizeof o->value - 1;
            memcpy(o->value, eq + 1, vl);
            o->value[vl] = '\0';
        }
        size_t kl = strlen(tok);
        kl = kl < sizeof o->key ? kl : sizeof o->key - 1;
        memcpy(o->key, tok, kl);
        o->key[kl] = '\0';
    }
    return true;
}

/* ---- expected diagnostics -------------------------------------------------------- */

typedef struct expect {
    sp_diag_sev sev;
    uint32_t line;
    char msg[512];
    bool matched;
    bool below; /* @below, not yet given the next line without expectations */
} expect;

typedef struct expects {
    expect *v;
    uint32_t n, cap;
} expects;

/* Scans `// expected-error @+1 {{msg}}` comments in text (first line = line_base + 1).
 * As in MLIR, `@below` names the next line that holds no expectation. */
static bool collect_expects(const char *text, size_t len, uint32_t line_base, expects *out)
{
    uint32_t line = line_base + 1;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL) {
            eol = end;
        }
        uint32_t n_before = out->n;
        const char *e = p;
        static const char *const kinds[4] = {"expected-error", "expected-warning",
                                             "expected-remark", "expected-note"};
        while (e < eol) {
            const char *hit = NULL;
            int kind = -1;
            for (int k = 0; k < 4; k++) {
                size_t kl = strlen(kinds[k]);
                for (const char *q = e; q + kl <= eol; q++) {
                    if (memcmp(q, kinds[k], kl) == 0 && (hit == NULL || q < hit)) {
                        hit = q;
                        kind = k;
                    }
                }
            }
            if (hit == NULL) {
                break;
            }
            const char *q = hit + strlen(kinds[kind]);
            int32_t target = (int32_t)line;
            bool below = false;
            while (q < eol && *q == ' ') {
                q++;
            }
            if (q < eol && *q == '@') {
                q++;
                if (q + 5 <= eol && memcmp(q, "above", 5) == 0) {
                    target--;
                    q += 5;
                } else if (q + 5 <= eol && memcmp(q, "below", 5) == 0) {
                    below = true;
                    q += 5;
                } else {
                    int sign = *q == '-' ? -1 : 1;
                    if (*q == '+' || *q == '-') {
                        q++;
                    }
                    int v = 0;
                    while (q < eol && *q >= '0' && *q <= '9') {
                        v = v * 10 + (*q - '0');
                        q++;
                    }
                    target += sign * v;
                }
            }
            const char *o = strstr(q, "{{");
            if (o == NULL || o >= eol) {
                e = q;
                continue;
            }
            const char *c = o + 2;
            const char *close = NULL;
            for (const char *r = c; r + 1 < eol; r++) {
                if (r[0] == '}' && r[1] == '}') {
                    close = r;
                    break;
                }
            }
            if (close == NULL) {
                e = q;
                continue;
            }
            if (CM_GROW_U32(out->v, out->cap, out->n + 1, NULL) != CM_OK) {
                return false;
            }
            expect *x = &out->v[out->n++];
            x->sev = (sp_diag_sev)kind;
            x->line = target > 0 ? (uint32_t)target : 0;
            x->matched = false;
            x->below = below;
            size_t ml = (size_t)(close - c);
            if (ml >= sizeof x->msg) {
                ml = sizeof x->msg - 1;
            }
            memcpy(x->msg, c, ml);
            x->msg[ml] = '\0';
            e = close + 2;
        }
        if (out->n == n_before) {
            for (uint32_t k = 0; k < out->n; k++) {
                if (out->v[k].below) {
                    out->v[k].line = line;
                    out->v[k].below = false;
                }
            }
        }
        line++;
        p = eol + 1;
    }
    return true;
}

/* Matches diagnostics against expectations; reports mismatches. Returns true
 * if all match. As in MLIR, one expectation may match several diagnostics
 * (an unmatched one is preferred). */
static bool verify(const char *file, const sp_diags *d, expects *ex, FILE *errs)
{
    bool ok = true;
    for (uint32_t i = 0; i < d->n; i++) {
        const sp_diag *g = &d->items[i];
        bool found = false;
        for (int pass = 0; pass < 2 && !found; pass++) {
            for (uint32_t k = 0; k < ex->n && !found; k++) {
                expect *x = &ex->v[k];
                if ((pass == 1 || !x->matched) && x->sev == g->sev && x->line == g->line &&
                    strstr(g->msg, x->msg) != NULL) {
                    x->matched = true;
                    found = true;
                }
            }
        }
        if (!found) {
            fprintf(errs, "%s:%u:%u: error: unexpected %s: %s\n", file, g->line, g->col,
                    sp_diag_sev_name(g->sev), g->msg);
            ok = false;
        }
    }
    for (uint32_t k = 0; k < ex->n; k++) {
        if (!ex->v[k].matched) {
            fprintf(errs, "%s:%u: error: expected %s \"%s\" was not produced\n", file,
                    ex->v[k].line, sp_diag_sev_name(ex->v[k].sev), ex->v[k].msg);
            ok = false;
        }
    }
    return ok;
}

/* ---- driver ------------------------------------------------------------------------ */

static bool is_split_line(const char *p, const char *eol)
{
    while (p < eol && (*p == ' ' || *p == '\t')) {
        p++;
    }
    if (eol - p < 2 || p[0] != '/' || p[1] != '/') {
        return false;
    }
    p += 2;
    while (p < eol && *p == ' ') {
        p++;
    }
    return eol - p >= 5 && memcmp(p, "-----", 5) == 0;
}

typedef struct run_cfg {
    const char *file;
    pass_inv inv[MAX_PASSES];
    int n_inv;
    bool verify;
    sp_print_opts print;
    FILE *out, *errs;
    uint32_t *once; /* warnings given once per process (sp_diag_once), chunk to chunk */
} run_cfg;

/* Processes one chunk; returns false on failure. */
static bool run_chunk(const run_cfg *cfg, const char *text, size_t len, uint32_t line_base,
                      bool *printed)
{
    cm_error err;
    cm_error_clear(&err);
    sp_diags diags;
    sp_diags_init(&diags);
    diags.once = *cfg->once;
    expects ex = {NULL, 0, 0};
    bool ok = true;
    if (cfg->verify && !collect_expects(text, len, line_base, &ex)) {
        fprintf(cfg->errs, "shardplan opt: out of memory\n");
        return false;
    }
    sp_module *m = NULL;
    sp_parse_notes notes;
    notes.n = 0;
    notes.quiet = false;
    cm_status st = sp_mlir_read_ex(text, len, line_base, &m, &notes, &err);
    bool failed = false;
    if (st != CM_OK) {
        /* the parse error, then the further errors MLIR reports with it */
        uint32_t l = 0, c = 0;
        sscanf(err.path, "%u:%u", &l, &c);
        sp_diag g[1 + SP_PARSE_NOTES_MAX];
        g[0] = (sp_diag){SP_DIAG_ERROR, SP_NONE, l, c, err.msg};
        for (uint32_t k = 0; k < notes.n; k++) {
            g[1 + k] = (sp_diag){SP_DIAG_ERROR, SP_NONE, notes.items[k].line,
                                 notes.items[k].col, notes.items[k].msg};
        }
        if (cfg->verify) {
            sp_diags all = {g, 1 + notes.n, 1 + notes.n, false, 0};
            ok = verify(cfg->file, &all, &ex, cfg->errs);
        } else {
            fprintf(cfg->errs, "%s:%s: error: %s\n", cfg->file, err.path, err.msg);
            for (uint32_t k = 1; k < 1 + notes.n; k++) {
                fprintf(cfg->errs, "%s:%u:%u: error: %s\n", cfg->file, g[k].line, g[k].col,
                        g[k].msg);
            }
            ok = false;
        }
        cm_free(ex.v);
        return ok;
    }
    if (sp_module_verify(m, &diags) != CM_OK) {
        failed = true;
    }
    for (int i = 0; i < cfg->n_inv && !failed; i++) {
        const pass_def *pd = find_pass(cfg->inv[i].name);
        cm_error_clear(&err);
        uint32_t n_before = diags.n;
        st = pd->fn(m, &cfg->inv[i], &diags, &err);
        bool reported = false;
        for (uint32_t k = n_before; k < diags.n; k++) {
            reported = reported || diags.items[k].sev == SP_DIAG_ERROR;
        }
        if (st != CM_OK) {
            if (!reported && (err.path[0] != '\0' || err.msg[0] != '\0')) {
                uint32_t l = 0, c = 0;
                sscanf(err.path, "%u:%u", &l, &c);
                sp_diags_add(&diags, NULL, SP_NONE, SP_DIAG_ERROR, "%s", err.msg);
                diags.items[diags.n - 1].line = l;
                diags.items[diags.n - 1].col = c;
            }
            failed = true;
        }
        for (uint32_t k = 0; k < diags.n; k++) {
            if (diags.items[k].sev == SP_DIAG_ERROR) {
                failed = true;
            }
        }
    }
    if (cfg->verify) {
        ok = verify(cfg->file, &diags, &ex, cfg->errs);
    } else {
        for (uint32_t k = 0; k < diags.n; k++) {
            const sp_diag *g = &diags.items[k];
            fprintf(cfg->errs, "%s:%u:%u: %s: %s\n", cfg->file, g->line, g->col,
                    sp_diag_sev_name(g->sev), g->msg);
        }
        ok = !failed;
    }
    if (!failed) {
        cm_buf b;
        cm_buf_init(&b);
        sp_mlir_print_sdy_opt(m, &cfg->print, &b);
        if (b.oom) {
            fprintf(cfg->errs, "shardplan opt: out of memory while printing\n");
            ok = false;
        } else {
            if (*printed) {
                fputs("// -----\n", cfg->out);
            }
            fwrite(b.data, 1, b.len, cfg->out);
            *printed = true;
        }
        cm_buf_fini(&b);
    }
    sp_module_destroy(m);
    *cfg->once = diags.once;
    sp_diags_fini(&diags);
    cm_free(ex.v);
    return ok;
}

static void usage(FILE *f)
{
    fputs("usage: shardplan opt FILE|- [options] [passes]\n"
          "options:\n"
          "  -split-input-file        process each `// -----` chunk separately\n"
          "  -verify-diagnostics      match diagnostics with expected-* comments\n"
          "  -mlir-print-op-generic   print every op in the generic form\n"
          "  -mlir-print-debuginfo    print op locations\n"
          "  -mlir-timing             print the time of each pipeline step to stderr\n"
          "  -o FILE                  write output to FILE\n"
          "passes:\n",
          f);
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        fprintf(f, "  -%s", passes[i].name);
        for (const char *const *o = passes[i].options; o != NULL && *o != NULL; o++) {
            fprintf(f, "%s%s=...", o == passes[i].options ? "='" : " ", *o);
        }
        fputs(passes[i].options != NULL && passes[i].options[0] != NULL ? "'\n" : "\n", f);
    }
}

int cmd_opt(int argc, char **argv, FILE *out, FILE *errs)
{
    run_cfg *cfg = cm_calloc(1, sizeof *cfg);
    if (cfg == NULL) {
        fputs("shardplan opt: out of memory\n", errs);
        return 1;
    }
    cfg->out = out;
    cfg->errs = errs;
    uint32_t once = 0;
    cfg->once = &once;
    bool split = false, timing = false;
    const char *file = NULL, *outfile = NULL;
    int rc = 1;
    FILE *of = NULL;
    char *text = NULL;
    bool options_end = false; /* after `--`, as LLVM's command line reads it */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_end && strcmp(a, "--") == 0) {
            options_end = true;
            continue;
        }
        if (options_end || a[0] != '-' || a[1] == '\0') {
            if (file != NULL) {
                fprintf(errs, "shardplan opt: more than one input file\n");
                goto out;
            }
            file = a;
            continue;
        }
        const char *name = a + 1;
        if (*name == '-') {
            name++;
        }
        if (strcmp(name, "split-input-file") == 0) {
            split = true;
        } else if (strcmp(name, "verify-diagnostics") == 0) {
            cfg->verify = true;
        } else if (strcmp(name, "mlir-print-op-generic") == 0) {
            cfg->print.generic = true;
        } else if (strcmp(name, "mlir-print-debuginfo") == 0) {
            cfg->print.debug_info = true;
        } else if (strcmp(name, "mlir-timing") == 0) {
            timing = true;
        } else if (strcmp(name, "allow-unregistered-dialect") == 0 ||
                   strcmp(name, "mlir-print-local-scope") == 0) {
            /* accepted for compatibility: unknown ops are always kept */
        } else if (strcmp(name, "o") == 0 && i + 1 < argc) {
            outfile = argv[++i];
        } else if (strcmp(name, "h") == 0 || strcmp(name, "help") == 0) {
            usage(out);
            rc = 0;
            goto out;
        } else {
            char pname[128];
            snprintf(pname, sizeof pname, "%s", name);
            char *eq = strchr(pname, '=');
            const char *opts = NULL;
            if (eq != NULL) {
                *eq = '\0';
                opts = name + (eq - pname) + 1;
            }
            const pass_def *pd = find_pass(pname);
            if (pd == NULL) {
                fprintf(errs, "shardplan opt: unknown option or pass '%s'\n", a);
                usage(errs);
                goto out;
            }
            if (cfg->n_inv >= MAX_PASSES) {
                fprintf(errs, "shardplan opt: too many passes\n");
                goto out;
            }
            pass_inv *inv = &cfg->inv[cfg->n_inv++];
            inv->name = pd->name;
            if (opts != NULL && !parse_pass_opts(opts, inv, errs)) {
                goto out;
            }
            for (int k = 0; k < inv->n_opts; k++) {
                bool known = false;
                for (const char *const *o = pd->options; o != NULL && *o != NULL; o++) {
                    known = known || strcmp(*o, inv->opts[k].key) == 0;
                }
                if (!known) {
                    fprintf(errs, "shardplan opt: -%s has no option '%s'\n", pd->name,
                            inv->opts[k].key);
                    goto out;
                }
            }
        }
    }
    for (int i = 0; i < cfg->n_inv; i++) {
        cfg->inv[i].timing = timing;
    }
    if (file == NULL) {
        file = "-";
    }
    cfg->file = strcmp(file, "-") == 0 ? "<stdin>" : file;
    size_t len;
    cm_error err;
    cm_error_clear(&err);
    if (cm_file_read(file, &text, &len, &err) != CM_OK) {
        fprintf(errs, "shardplan opt: %s\n", err.msg);
        goto out;
    }
    if (outfile != NULL) {
        of = fopen(outfile, "w");
        if (of == NULL) {
            fprintf(errs, "shardplan opt: cannot write %s\n", outfile);
            goto out;
        }
        cfg->out = of;
    }
    bool ok = true, printed = false;
    if (!split) {
        ok = run_chunk(cfg, text, len, 0, &printed);
    } else {
        const char *p = text, *end = text + len, *chunk = text;
        uint32_t line = 0, chunk_line = 0;
        while (p <= end) {
            const char *eol = memchr(p, '\n', (size_t)(end - p));
            if (eol == NULL) {
                eol = end;
            }
            if (is_split_line(p, eol) || eol == end) {
                const char *stop = eol == end && !is_split_line(p, eol) ? end : p;
                ok = run_chunk(cfg, chunk, (size_t)(stop - chunk), chunk_line, &printed) && ok;
                /* a chunk's output before the next chunk's diagnostics (2>&1) */
                fflush(cfg->out);
                chunk = eol + 1;
                chunk_line = line + 1;
            }
            line++;
            if (eol == end) {
                break;
            }
            p = eol + 1;
        }
    }
    rc = ok ? 0 : 1;
out:
    if (of != NULL) {
        fclose(of);
    }
    cm_free(text);
    cm_free(cfg);
    return rc;
}
