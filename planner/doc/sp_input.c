/* SPDX-License-Identifier: Apache-2.0
 * planner: the one input loader (sp_input.h). Reading, the rules document,
 * the propagation pass and partitioning are done here and nowhere else, so
 * that a plan, its cost, its lint and its benchmark see one module for one
 * (input, options). */
#include "sp_input.h"

#include <stdio.h>
#include <string.h>

#include "sp_diag.h"
#include "sp_gspmd.h"
#include "sp_mlir.h"
#include "sp_ops.h"
#include "sp_pipeline.h"
#include "sp_prop.h"
#include "sp_collectives.h"
#include "sp_reshard.h"

static const char *const pass_names[SP_PLAN_N_PASSES] = {
    "sdy-propagation-pipeline", "sdy-user-priority-propagate", "sdy-op-priority-propagate",
    "sdy-aggressive-propagate", "sdy-basic-propagate"};

bool sp_plan_pass_parse(const char *name, sp_plan_pass *out)
{
    while (*name == '-') {
        name++;
    }
    for (size_t i = 0; i < SP_PLAN_N_PASSES; i++) {
        if (strcmp(name, pass_names[i]) == 0) {
            *out = (sp_plan_pass)i;
            return true;
        }
    }
    return false;
}

const char *sp_plan_pass_name(sp_plan_pass p)
{
    return (unsigned)p < SP_PLAN_N_PASSES ? pass_names[p] : "?";
}

void sp_input_opts_init(sp_input_opts *o)
{
    memset(o, 0, sizeof *o);
    o->pass = SP_PLAN_PIPELINE;
    o->propagate = true;
}

bool sp_input_looks_json(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
            return s[i] == '{';
        }
    }
    return false;
}

cm_status sp_input_propagate(sp_module *m, sp_plan_pass pass, const sp_custom_rules *custom,
                             bool record_edges, const cm_cancel *cancel, sp_diags *d, cm_error *err)
{
    static const sp_prop_level levels[SP_PLAN_N_PASSES] = {
        SP_PROP_USER_PRIORITY, SP_PROP_USER_PRIORITY, SP_PROP_OP_PRIORITY, SP_PROP_AGGRESSIVE,
        SP_PROP_BASIC};
    if ((unsigned)pass >= SP_PLAN_N_PASSES) {
        return cm_error_set(err, CM_EINVAL, "/options/pass", "unknown pass %d", (int)pass);
    }
    sp_prop_opts po;
    sp_prop_opts_init(&po, levels[pass]);
    po.keep_sharding_rules = true;
    po.debug_sharding_origins = true;
    po.debug_edge_source_sharding = record_edges;
    po.custom = custom;
    po.cancel = cancel;
    if (pass == SP_PLAN_PIPELINE) {
        return sp_pass_propagation_pipeline(m, &po, d, err);
    }
    return sp_propagate(m, &po, d, err);
}

/* The JSON Pointer of op in a graph document: "/functions/F/ops/I" (or
 * "/ops/I" in the single-function form), "/regions/R/ops/J" for each nested
 * region, ".../outputs" for a function's return and "/functions/F" or ""
 * for the function itself; "/meshes" for a mesh. */
static void graph_op_path(const sp_module *m, uint32_t op, bool functions_form, char *buf,
                          size_t cap)
{
    char tail[200] = "";
    uint32_t cur = op;
    buf[0] = '\0';
    if (m->ops[op].kind == SP_OP_SDY_MESH) {
        snprintf(buf, cap, "/meshes");
        return;
    }
    for (int depth = 0; depth < 32 && cur != SP_NONE; depth++) {
        const sp_op *o = &m->ops[cur];
        if (o->parent_block == SP_NONE) {
            return;
        }
        const sp_block *b = &m->blocks[o->parent_block];
        uint32_t idx = sp_op_index_in_block(m, cur);
        char t2[256];
        if (b->parent_op == SP_NONE) { /* cur is a function in the module body */
            uint32_t fi = 0;
            for (uint32_t k = 0; k < idx; k++) {
                fi += m->ops[b->ops[k]].kind == SP_OP_FUNC_FUNC;
            }
            if (functions_form) {
                snprintf(buf, cap, "/functions/%u%s", fi, tail);
            } else {
                snprintf(buf, cap, "%s", tail);
            }
            return;
        }
        const sp_op *parent = &m->ops[b->parent_op];
        if (parent->kind == SP_OP_FUNC_FUNC) {
            if (o->kind == SP_OP_FUNC_RETURN) {
                snprintf(t2, sizeof t2, "/outputs%s", tail);
            } else {
                snprintf(t2, sizeof t2, "/ops/%u%s", idx, tail);
            }
        } else {
            uint32_t r = 0;
            for (uint32_t k = 0; k < parent->n_regions; k++) {
                for (uint32_t j = 0; j < parent->regions[k].n_blocks; j++) {
                    r = parent->regions[k].blocks[j] == o->parent_block ? k : r;
                }
            }
            snprintf(t2, sizeof t2, "/regions/%u/ops/%u%s", r, idx, tail);
        }
        memcpy(tail, t2, sizeof tail - 1); /* a deeper path is cut short */
        tail[sizeof tail - 1] = '\0';
        cur = b->parent_op;
    }
}

/* Verifies in's module once, before any pass, as MLIR verifies after
 * parsing: the first error found becomes err, at "LINE:COL" for MLIR text
 * and at the op's JSON Pointer for a graph document. */
static cm_status verify_input(sp_input *in, cm_error *err)
{
    sp_diags d;
    sp_diags_init(&d);
    cm_status st = sp_module_verify(in->m, &d);
    if (st != CM_OK) {
        const sp_diag *g = NULL;
        for (uint32_t k = 0; k < d.n && g == NULL; k++) {
            g = d.items[k].sev == SP_DIAG_ERROR ? &d.items[k] : NULL;
        }
        char path[256] = "";
        if (g != NULL && in->g != NULL && g->op != SP_NONE) {
            graph_op_path(in->m, g->op, in->functions_form, path, sizeof path);
        } else if (g != NULL && g->line > 0) {
            snprintf(path, sizeof path, "%u:%u", g->line, g->col);
        }
        if (g == NULL) {
            st = d.oom ? cm_error_oom(err)
                       : cm_error_set(err, CM_EINVAL, NULL, "the module does not verify");
        } else {
            st = cm_error_set(err, CM_EINVAL, path, "%s", g->msg);
        }
    }
    sp_diags_fini(&d);
    return st;
}

cm_status sp_input_verify_mlir(sp_module *m, cm_error *err)
{
    sp_input in;
    memset(&in, 0, sizeof in);
    in.m = m;
    return verify_input(&in, err);
}

/* The rules document of o->rules: a graph document whose custom_rules apply
 * to an input that cannot carry them. Its errors are the caller's, at /rules. */
static cm_status read_rules(const sp_input_opts *o, sp_input *in, cm_error *err)
{
    cm_error e;
    cm_error_clear(&e);
    if (sp_graph_decode(o->rules, o->rules_len, o->limits, &in->rules_g, &e) != CM_OK) {
        if (e.code == CM_ENOMEM) {
            return cm_error_set(err, CM_ENOMEM, NULL, "%s", e.msg);
        }
        return cm_error_set(err, e.code, "/rules", "the rules document: %s%s%s", e.msg,
                            e.path[0] != '\0' ? " at " : "", e.path);
    }
    if (in->custom == NULL) {
        in->custom = sp_graph_custom_rules(in->rules_g);
    }
    return CM_OK;
}

cm_status sp_input_read(const char *text, size_t len, const sp_input_opts *o, sp_input *in,
                        cm_error *err)
{
    sp_input_opts defo;
    if (o == NULL) {
        sp_input_opts_init(&defo);
        o = &defo;
    }
    memset(in, 0, sizeof *in);
    cm_status st;
    if (sp_input_looks_json(text, len)) {
        st = sp_graph_decode(text, len, o->limits, &in->g, err);
        if (st == CM_OK) {
            in->m = sp_graph_module(in->g);
            in->custom = sp_graph_custom_rules(in->g);
            in->functions_form = sp_graph_has_functions(in->g);
        }
    } else {
        st = sp_mlir_read(text, len, 0, &in->m, err);
        if (st == CM_OK) {
            uint32_t n_funcs = 0;
            const sp_block *top = &in->m->blocks[in->m->body];
            for (uint32_t i = 0; i < top->n_ops; i++) {
                n_funcs += in->m->ops[top->ops[i]].kind == SP_OP_FUNC_FUNC;
            }
            in->functions_form = n_funcs != 1;
        }
    }
    /* GSPMD input (mhlo.sharding strings, @Sharding calls, no sdy mesh) is
     * imported as XLA's Shardy import does, before anything looks at it */
    if (st == CM_OK && in->g == NULL && sp_gspmd_detect_round_trip(in->m)) {
        /* the sdy round trip's form (jax.export, XLA dumps): xla.sdy.* */
        st = sp_gspmd_round_trip_import(in->m, false, NULL, err);
    } else if (st == CM_OK && in->g == NULL && sp_gspmd_detect(in->m)) {
        st = sp_gspmd_import(in->m, err);
    }
    /* and JAX's shard_map as XLA's round trip writes it (body calls between
     * xla.sdy.GlobalToLocalShape / LocalToGlobalShape) */
    if (st == CM_OK && in->g == NULL) {
        st = sp_gspmd_shard_map_import(in->m, NULL, err);
    }
    if (st == CM_OK) {
        st = verify_input(in, err);
    }
    if (st == CM_OK && o->rules != NULL && o->rules_len > 0) {
        st = read_rules(o, in, err);
    }
    if (st == CM_OK) {
        in->partitioned = sp_module_is_partitioned(in->m);
    }
    if (st == CM_OK && o->propagate && !in->partitioned) {
        sp_diags d;
        sp_diags_init(&d);
        st = sp_input_propagate(in->m, o->pass, in->custom, o->record_edges, o->cancel, &d, err);
        in->n_diags = d.n;
        sp_diags_fini(&d);
        in->propagated = st == CM_OK;
    }
    if (st != CM_OK) {
        sp_input_fini(in);
    }
    return st;
}

cm_status sp_input_load(const char *path, const sp_input_opts *o, sp_input *in, cm_error *err)
{
    memset(in, 0, sizeof *in);
    char *text = NULL;
    size_t len = 0;
    cm_status st = cm_file_read(path, &text, &len, err);
    if (st == CM_OK) {
        st = sp_input_read(text, len, o, in, err);
    }
    cm_free(text);
    return st;
}

cm_status sp_module_partition(sp_module *m, cm_error *err)
{
    sp_diags d;
    sp_diags_init(&d);
    /* Shardy's export (full version), then XLA's partitioner for what Shardy
     * leaves to it: the operands of a custom call without a rule replicated */
    sp_reshard_opts ro = {.full_version = true, .replicate_unknown_custom_calls = true};
    cm_status st = sp_pass_insert_explicit_reshards(m, &ro, &d, err);
    sp_diags_fini(&d);
    if (st == CM_OK) {
        st = sp_pass_reshard_to_collectives(m, false, err);
    }
    return st;
}

cm_status sp_input_partition(sp_input *in, cm_error *err)
{
    if (in->partitioned) {
        return CM_OK;
    }
    cm_status st = sp_module_partition(in->m, err);
    in->partitioned = st == CM_OK;
    return st;
}

void sp_input_fini(sp_input *in)
{
    if (in->g != NULL) {
        sp_graph_destroy(in->g);
    } else {
        sp_module_destroy(in->m);
    }
    sp_graph_destroy(in->rules_g);
    memset(in, 0, sizeof *in);
}
