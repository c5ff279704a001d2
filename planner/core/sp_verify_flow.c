/* SPDX-License-Identifier: Apache-2.0
 * planner: sdy.data_flow_edge and sdy.func_data_flow_edge as Shardy's
 * verifier checks them (verifiers.cc, DataFlowEdgeOp and FuncDataFlowEdgeOp
 * symbol-use verifiers): a static-shaped result, an input used by the edge
 * alone, and an input of the right origin (not another sdy op for a data
 * flow edge; a func argument or a call result for a func data flow edge).
 * The edge's sharding itself is checked with the other shardings. Also
 * MLIR's region isolation for the sdy ops that are IsolatedFromAbove
 * (manual_computation, named_computation): nothing inside uses a value
 * defined outside. */
#include "sp_verify_int.h"

#include <string.h>

#include "sp_ops.h"

static bool static_tensor(const sp_type *t)
{
    if (t->kind != SP_TYPE_TENSOR) {
        return false;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
        if (t->dims[d] < 0) {
            return false;
        }
    }
    return true;
}

static void check_edge(sp_module *m, uint32_t op, const uint32_t *counts, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    bool func_edge = o->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE;
    const char *opname = func_edge ? "sdy.func_data_flow_edge" : "sdy.data_flow_edge";
    const char *input = func_edge ? "operand" : "input";
    if (o->n_operands != 1 || o->n_results != 1) {
        return;
    }
    const sp_type *t = &m->types[m->values[o->first_result].type];
    if (!static_tensor(t)) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "'%s' op expected %s to have a static-shaped result. type: %s", opname,
                     opname, t->text);
        *bad = true;
        return;
    }
    uint32_t v = o->operands[0];
    if (counts[v] != 1) { /* uses, one per operand slot */
        sp_diags_add(d, m, op, SP_DIAG_ERROR, "'%s' op expected %s of %s to have a single user",
                     opname, input, opname);
        *bad = true;
        return;
    }
    uint32_t def = m->values[v].def;
    if (!func_edge) {
        if (def != SP_NONE && strncmp(m->ops[def].name, "sdy.", 4) == 0 &&
            m->ops[def].kind != SP_OP_SDY_NAMED_COMPUTATION &&
            m->ops[def].kind != SP_OP_SDY_MANUAL_COMPUTATION) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR,
                         "'%s' op expected input of sdy.data_flow_edge to not be defined by an "
                         "SdyDialect op (other than an sdy.named_computation).",
                         opname);
            sp_diags_add(d, m, def, SP_DIAG_NOTE,
                         "sdy op defining the input of the sdy.data_flow_edge");
            *bad = true;
        }
        return;
    }
    if (def == SP_NONE) {
        uint32_t blk = m->values[v].block;
        uint32_t owner = blk != SP_NONE ? m->blocks[blk].parent_op : SP_NONE;
        if (owner == SP_NONE || m->ops[owner].kind != SP_OP_FUNC_FUNC) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR,
                         "'%s' op expected operand of sdy.func_data_flow_edge to be a block "
                         "argument of a func op.",
                         opname);
            *bad = true;
        }
    } else if (m->ops[def].kind != SP_OP_FUNC_CALL) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "'%s' op expected operand of sdy.func_data_flow_edge to be a result of "
                     "call op.",
                     opname);
        *bad = true;
    }
}

void sp_verify_data_flow_edges(sp_module *m, sp_diags *d, bool *bad)
{
    bool any = false;
    for (uint32_t i = 0; i < m->n_ops && !any; i++) {
        any = m->ops[i].kind == SP_OP_SDY_DATA_FLOW_EDGE ||
              m->ops[i].kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE;
    }
    if (!any) {
        return;
    }
    uint32_t *counts = cm_calloc(m->n_values + 1u, sizeof *counts);
    if (counts == NULL) {
        d->oom = true;
        *bad = true;
        return;
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *o = &m->ops[i];
        if (o->parent_block == SP_NONE) {
            continue; /* top level or detached: uses nothing a data flow edge reads */
        }
        for (uint32_t k = 0; k < o->n_operands; k++) {
            if (o->operands[k] < m->n_values) {
                counts[o->operands[k]]++;
            }
        }
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *o = &m->ops[i];
        if (o->parent_block != SP_NONE && (o->kind == SP_OP_SDY_DATA_FLOW_EDGE ||
                                           o->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE)) {
            check_edge(m, i, counts, d, bad);
        }
    }
    cm_free(counts);
}

/* Is value v defined inside op x (by an op nested in x, or as an argument
 * of a block of x's regions)? */
static bool defined_inside(const sp_module *m, uint32_t v, uint32_t x)
{
    uint32_t def = m->values[v].def;
    uint32_t blk = def != SP_NONE ? m->ops[def].parent_block : m->values[v].block;
    for (uint32_t hops = 0; blk != SP_NONE && hops <= m->n_ops; hops++) {
        uint32_t owner = m->blocks[blk].parent_op;
        if (owner == x) {
            return true;
        }
        if (owner == SP_NONE) {
            return false;
        }
        blk = m->ops[owner].parent_block;
    }
    return false;
}

/* The first op nested in the regions of op (not inside a nested isolated
 * op) that uses a value defined outside x, or SP_NONE. */
static uint32_t outside_use(const sp_module *m, uint32_t op, uint32_t x, uint32_t depth)
{
    const sp_op *o = &m->ops[op];
    if (depth > 256) {
        return SP_NONE;
    }
    for (uint32_t r = 0; r < o->n_regions; r++) {
        for (uint32_t b = 0; b < o->regions[r].n_blocks; b++) {
            const sp_block *blk = &m->blocks[o->regions[r].blocks[b]];
            for (uint32_t k = 0; k < blk->n_ops; k++) {
                uint32_t in = blk->ops[k];
                const sp_op *io = &m->ops[in];
                for (uint32_t j = 0; j < io->n_operands; j++) {
                    if (io->operands[j] < m->n_values && !defined_inside(m, io->operands[j], x)) {
                        return in;
                    }
                }
                if (io->kind == SP_OP_SDY_MANUAL_COMPUTATION ||
                    io->kind == SP_OP_SDY_NAMED_COMPUTATION || io->kind == SP_OP_FUNC_FUNC) {
                    continue; /* verified as its own isolated op */
                }
                uint32_t hit = outside_use(m, in, x, depth + 1);
                if (hit != SP_NONE) {
                    return hit;
                }
            }
        }
    }
    return SP_NONE;
}

void sp_verify_isolated(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    sp_op_kind k = m->ops[op].kind;
    if (k != SP_OP_SDY_MANUAL_COMPUTATION && k != SP_OP_SDY_NAMED_COMPUTATION) {
        return;
    }
    uint32_t hit = outside_use(m, op, op, 0);
    if (hit != SP_NONE) {
        sp_diags_add(d, m, hit, SP_DIAG_ERROR, "'%s' op using value defined outside the region",
                     m->ops[hit].name);
        sp_diags_add(d, m, op, SP_DIAG_NOTE, "required by region isolation constraints");
        *bad = true;
    }
}
