/* SPDX-License-Identifier: Apache-2.0
 * planner: sharding projection (Shardy's propagation/sharding_projection.cc):
 * a tensor's dimension shardings projected onto the factors of an op's
 * sharding rule. Propagation (sp_basic_propagation.c) and explicit reshards
 * (export/sp_insert_explicit_reshards.c) both start an op from it. Axes are
 * sp_ax.h atoms (axis index, pre-size, size) on the op's mesh.
 * Ownership: the caller provides every output array. Thread contract: pure
 * functions; safe from any thread. */
#ifndef SP_SHARDING_PROJECTION_H
#define SP_SHARDING_PROJECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_ax.h"
#include "sp_shard.h"

#define SP_PROJ_MAX_AXES 16 /* axes of one factor, of one dimension, or replicated */

/* How one factor of a rule is sharded in one tensor. */
typedef struct sp_factor_axes {
    uint8_t present;           /* the tensor has this factor */
    uint8_t closed;            /* its dim is closed */
    uint8_t minor_most;        /* last factor of its dim */
    uint8_t n, n_over;         /* entries used in axes and over */
    ax axes[SP_PROJ_MAX_AXES]; /* the axes sharding the factor, major to minor */
    ax over[SP_PROJ_MAX_AXES]; /* the rest of the dim's axes when they do not
                                * divide this (non-minor-most) factor: the
                                * factor and the dim's later factors get none */
} sp_factor_axes;

/* Projects sharding s (NULL: unsharded) of a tensor mapped by map onto the
 * factors of rule r, into row[0..r->n_factors). Each dim's axes go to its
 * factors major to minor: a factor takes axes while they divide what is left
 * of its size, an axis that only partly divides it is split into a major
 * sub-axis for it and a minor rest for the next factor, and the minor-most
 * factor takes whatever remains. When an axis shares no divisor with a
 * non-minor-most factor, the dim's remaining axes overflow that factor
 * (row[f].over). Factors the tensor does not have stay absent. mesh resolves
 * the axis names; NULL (the empty mesh) projects no axes. When repl is not
 * NULL, s's replicated then unreduced axes (the axes no dim may take) go
 * to repl[0..*n_repl) (room for SP_PROJ_MAX_AXES); otherwise they are
 * ignored. Returns false when the sharding cannot be handled (an axis the
 * mesh does not have, or more than SP_PROJ_MAX_AXES axes in a dim or
 * replicated and unreduced together); row is then undefined. */
bool sp_sharding_project(const sp_rule *r, const sp_tensor_mapping *map, const sp_sharding *s,
                         const sp_mesh *mesh, sp_factor_axes *row, ax *repl, uint32_t *n_repl);

#endif /* SP_SHARDING_PROJECTION_H */
