/* SPDX-License-Identifier: Apache-2.0
 * planner: what the Shardy passes of planner/shardy/{import,propagation,export}
 * share: an op walk, per-value use lists (extensible linked lists, and
 * fixed CSR lists), op positions, the constant-expression
 * test of the splitter and the merger, a rewrite of function input and output
 * shardings, and the timed pipeline step. Ownership: use lists and position
 * arrays are heap memory the caller frees as stated. Thread contract: one
 * module per call. */
#ifndef SP_PASS_H
#define SP_PASS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cm.h"
#include "sp_ir.h"

/* cm_error_oom(err). Passes call cm_error_oom directly; this name stays
 * until planner/shardy/import/sp_apply_sharding_constraints.c does too. */
cm_status sp_pass_oom(cm_error *err);

/* Called on one op by sp_pass_walk; a status other than CM_OK stops the walk. */
typedef cm_status (*sp_pass_op_fn)(sp_module *m, uint32_t op, void *ctx);

/* Calls fn on every op of block and of every block nested in it, in program
 * order (an op before the ops of its regions). fn may insert ops into the
 * block being walked: the walk indexes blocks by position. Returns the first
 * status other than CM_OK that fn returns, else CM_OK. */
cm_status sp_pass_walk(sp_module *m, uint32_t block, sp_pass_op_fn fn, void *ctx);

/* One use of a value: operand idx of op; next is the pool index of the
 * value's next use (SP_NONE ends the list). */
typedef struct sp_use {
    uint32_t op, idx, next;
} sp_use;

/* Per-value uses as linked lists in a pool, so passes can add uses. A list is
 * in reverse program order: its head is the last use. */
typedef struct sp_uses {
    uint32_t *head; /* per value: pool index of its first list node, or SP_NONE */
    sp_use *pool;
    uint32_t n, cap;
    uint32_t n_values;   /* entries of head (values the lists have room for) */
    const uint8_t *want; /* per value: track its uses (NULL: all) */
} sp_uses;

/* Builds use lists with room for values created later (up to cap_values,
 * which must be at least m->n_values), only for the values flagged in want
 * (NULL: every value; want is borrowed for the lists' lifetime). Release
 * with sp_uses_free, also after a failure. Errors: CM_ENOMEM (err is not
 * set: the caller reports it). */
cm_status sp_uses_build(sp_module *m, sp_uses *u, uint32_t cap_values, const uint8_t *want);
/* Records that operand idx of op uses value v (v < u->n_values); a value
 * want leaves out is skipped. Errors: CM_ENOMEM. */
cm_status sp_uses_add(sp_uses *u, uint32_t v, uint32_t op, uint32_t idx);
/* The number of recorded uses of v. */
uint32_t sp_uses_count(const sp_uses *u, uint32_t v);
/* Frees the lists (a zeroed sp_uses is fine). */
void sp_uses_free(sp_uses *u);

/* Per-key lists of uint32_t items in two flat arrays (compressed sparse
 * rows): the items of key k are items[start[k] .. start[k + 1]), in the
 * order they were added. For lists fixed once built, such as the ops to
 * wake when a value's sharding changes; sp_uses is the one passes can
 * extend. */
typedef struct sp_csr {
    uint32_t *start; /* n_keys + 1 entries */
    uint32_t *items; /* start[n_keys] entries */
    uint32_t n_keys;
    uint32_t *fill; /* while filling: per key, the next free index; NULL while counting */
} sp_csr;

/* Lists every (key, item) pair with sp_csr_add. sp_csr_build calls it
 * twice, to count and to fill, so it must add the same pairs both times. */
typedef void (*sp_csr_edges_fn)(sp_csr *c, void *ctx);

/* Builds c over n_keys keys from the pairs edges(c, ctx) adds. Release with
 * sp_csr_fini, also after a failure. Errors: CM_ENOMEM (through
 * cm_error_oom; err may be NULL). */
cm_status sp_csr_build(sp_csr *c, uint32_t n_keys, sp_csr_edges_fn edges, void *ctx,
                       cm_error *err);
/* Frees the lists (a zeroed sp_csr is fine) and leaves c zeroed. */
void sp_csr_fini(sp_csr *c);

/* Adds item to key's list (key < c->n_keys); only within an edges function. */
static inline void sp_csr_add(sp_csr *c, uint32_t key, uint32_t item)
{
    if (c->fill == NULL) {
        c->start[key + 1]++;
    } else {
        c->items[c->fill[key]++] = item;
    }
}

/* Position of every op within its block (SP_NONE when detached): an array of
 * m->n_ops + 1 entries the caller frees with cm_free; NULL when out of
 * memory. */
uint32_t *sp_pass_op_positions(const sp_module *m);

/* Is op opid a constant expression: a constant or iota without operands, or
 * a broadcast, reshape, slice or element-wise op without regions whose
 * operands all are? memo (m->n_ops entries, zeroed at first) caches the
 * answers: 1 yes, 2 no. */
bool sp_pass_is_const_expr(const sp_module *m, uint32_t opid, uint8_t *memo);
/* Is op a broadcast_in_dim of a scalar? */
bool sp_pass_is_scalar_expansion(const sp_module *m, const sp_op *op);

/* A rewrite of one function input or output sharding s of a value of type t:
 * *out is a new sharding (in m's arena) to set, or NULL when s stays.
 * Errors: CM_ENOMEM. */
typedef cm_status (*sp_pass_sharding_fix)(sp_module *m, const sp_sharding *s, const sp_type *t,
                                          sp_sharding **out);

/* Applies fix to the sharding of every function argument and result that
 * has one. Errors: CM_ENOMEM (the module may then be partly rewritten). */
cm_status sp_pass_io_shardings_fix(sp_module *m, sp_pass_sharding_fix fix, cm_error *err);

/* Inserts at index of block an edge op `name` (sdy.data_flow_edge,
 * sdy.func_data_flow_edge) whose one operand is v and whose result has v's
 * type, carrying attr under attr_name when attr is not NULL, at location
 * loc/where; *result is the edge's value. Errors: CM_ENOMEM. */
cm_status sp_pass_insert_edge(sp_module *m, const char *name, uint32_t v, const char *attr_name,
                              sp_attr *attr, uint32_t block, uint32_t index, const char *loc,
                              const sp_loc *where, uint32_t *result);

/* One step of a pass pipeline: when st is CM_OK, runs call and stores its
 * status in st; when timing, prints the step's time under name to stderr. */
#define SP_PASS_STEP(st, timing, name, call)                                                       \
    do {                                                                                           \
        if ((st) == CM_OK) {                                                                       \
            double t0_ = (timing) ? cm_now() : 0.0;                                                \
            (st) = (call);                                                                         \
            if (timing) {                                                                          \
                fprintf(stderr, "  %-44s %8.3f s\n", (name), cm_now() - t0_);                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#endif /* SP_PASS_H */
