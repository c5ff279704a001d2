/* SPDX-License-Identifier: Apache-2.0
 * planner: sdy.named_computation as Shardy's verifier checks it
 * (verifiers.cc, NamedComputationOp, and its inferReturnTypes): the results
 * have the types the region returns; the region takes as many arguments as
 * the op has operands, of the operands' types; and in and out shardings,
 * when given, are valid for the operand and result types, one per value. */
#include "sp_verify_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp_ops.h"

static void nc_err(sp_module *m, uint32_t op, sp_diags *d, bool *bad, bool op_prefix,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void nc_err(sp_module *m, uint32_t op, sp_diags *d, bool *bad, bool op_prefix,
                   const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_diags_add(d, m, op, SP_DIAG_ERROR, "%s%s", op_prefix ? "'sdy.named_computation' op " : "",
                 msg);
    *bad = true;
}

/* Appends 'T1', 'T2' for the n type ids to buf. */
static void types_str(const sp_module *m, const uint32_t *tys, uint32_t n, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n && k < cap; i++) {
        int w = snprintf(buf + k, cap - k, "%s'%s'", i > 0 ? ", " : "", m->types[tys[i]].text);
        k += w > 0 ? (size_t)w : 0;
    }
}

/* One of in_shardings / out_shardings against the value types. */
static bool shardings_ok(sp_module *m, uint32_t op, const char *key, const uint32_t *tys,
                         uint32_t n, sp_diags *d, bool *bad)
{
    const sp_attr *sh = sp_op_attr(m, op, key);
    if (sh == NULL || sh->kind != SP_ATTR_SHARDING_LIST) {
        return true;
    }
    if (sh->u.shardings.n != n) {
        nc_err(m, op, d, bad, true, "%s shardings don't match number of values: %u shardings vs "
               "%u values", key, sh->u.shardings.n, n);
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        const sp_sharding *s = sh->u.shardings.items[i];
        const sp_mesh *mesh =
            s->mesh != NULL ? s->mesh : (s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL);
        char msg[512], who[32];
        if (n == 1) {
            snprintf(who, sizeof who, "-");
        } else {
            snprintf(who, sizeof who, "%u -", i);
        }
        if (!sp_verify_sharding(s, mesh, &m->types[tys[i]], msg, sizeof msg)) {
            nc_err(m, op, d, bad, true, "%s %s %s", key, who, msg);
            return false;
        }
    }
    return true;
}

void sp_verify_named_computation(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    if (o->kind != SP_OP_SDY_NAMED_COMPUTATION || o->n_regions != 1 ||
        o->regions[0].n_blocks != 1) {
        return;
    }
    const sp_block *b = &m->blocks[o->regions[0].blocks[0]];
    uint32_t rtys[64], itys[64];
    if (o->n_results > 64 || o->n_operands > 64) {
        return; /* more than the messages are built for; the rest still checks */
    }
    /* inferReturnTypes: the results are what the terminator returns */
    if (b->n_ops > 0 && m->ops[b->ops[b->n_ops - 1]].kind == SP_OP_SDY_RETURN) {
        const sp_op *ret = &m->ops[b->ops[b->n_ops - 1]];
        bool same = ret->n_operands == o->n_results;
        for (uint32_t i = 0; same && i < o->n_results; i++) {
            same = m->values[ret->operands[i]].type == m->values[o->first_result + i].type;
        }
        if (!same && ret->n_operands <= 64) {
            char inf[1024], have[1024];
            for (uint32_t i = 0; i < ret->n_operands; i++) {
                itys[i] = m->values[ret->operands[i]].type;
            }
            for (uint32_t i = 0; i < o->n_results; i++) {
                rtys[i] = m->values[o->first_result + i].type;
            }
            types_str(m, itys, ret->n_operands, inf, sizeof inf);
            types_str(m, rtys, o->n_results, have, sizeof have);
            nc_err(m, op, d, bad, false, "failed to infer returned types");
            nc_err(m, op, d, bad, true, "inferred type(s) %s are incompatible with return type(s) "
                   "of operation %s", inf, have);
            return;
        }
    }
    if (b->n_args != o->n_operands) {
        nc_err(m, op, d, bad, false, "number of block arguments must match the number of "
               "operands: %u != %u", b->n_args, o->n_operands);
        return;
    }
    for (uint32_t i = 0; i < b->n_args; i++) {
        uint32_t inner = m->values[b->first_arg + i].type, outer = m->values[o->operands[i]].type;
        if (inner != outer) {
            nc_err(m, op, d, bad, false, "expected the type of the %u'th block argument to match "
                   "the type of the corresponding operand: '%s' vs '%s'", i, m->types[inner].text,
                   m->types[outer].text);
            return;
        }
    }
    for (uint32_t i = 0; i < o->n_operands; i++) {
        itys[i] = m->values[o->operands[i]].type;
    }
    for (uint32_t i = 0; i < o->n_results; i++) {
        rtys[i] = m->values[o->first_result + i].type;
    }
    if (shardings_ok(m, op, "in_shardings", itys, o->n_operands, d, bad)) {
        (void)shardings_ok(m, op, "out_shardings", rtys, o->n_results, d, bad);
    }
}
