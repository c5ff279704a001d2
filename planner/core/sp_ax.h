/* SPDX-License-Identifier: Apache-2.0
 * planner, private: the algebra of mesh axes and sub-axes shared by
 * propagation (sp_prop.c), explicit reshards (sp_reshard.c), collectives
 * (sp_collectives.c) and the rule registry (sp_rules.c). An axis or sub-axis
 * is (mesh axis index, pre-size, size); a full axis has pre = 1 and size =
 * the axis size, and "x":(p)k is the k-sized sub-axis after the first p. */
#ifndef SP_AX_H
#define SP_AX_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sp_shard.h"

typedef struct ax {
    uint32_t axis; /* index in the op's mesh */
    int64_t pre;   /* pre-size, >= 1 */
    int64_t size;  /* >= 1 */
} ax;

static inline int64_t gcd64(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a < 0 ? -a : a;
}

static inline bool ax_eq(ax a, ax b)
{
    return a.axis == b.axis && a.pre == b.pre && a.size == b.size;
}

/* a is a (possibly equal) major prefix of b */
static inline bool ax_prefix(ax a, ax b)
{
    return a.axis == b.axis && a.pre == b.pre && a.size <= b.size && b.size % a.size == 0;
}

static inline bool ax_overlap(ax a, ax b)
{
    return a.axis == b.axis && a.pre < b.pre * b.size && b.pre < a.pre * a.size;
}

/* Two refs can be used in one sharding: different axes, or sub-axes of one
 * axis that do not overlap and nest (the minor one's pre-size is a multiple of
 * the major one's next pre-size). */
static inline bool ax_coexist(ax a, ax b)
{
    if (a.axis != b.axis) {
        return true;
    }
    if (ax_overlap(a, b)) {
        return false;
    }
    ax lo = a.pre < b.pre ? a : b, hi = a.pre < b.pre ? b : a;
    return hi.pre % (lo.pre * lo.size) == 0;
}

/* Shrinks *a to its largest major prefix that can coexist with b; false if
 * none does. */
static inline bool ax_prefix_without(ax *a, ax b)
{
    if (ax_coexist(*a, b)) {
        return true;
    }
    if (b.pre <= a->pre) {
        return false;
    }
    for (int64_t k = a->size - 1; k >= 2; k--) {
        if (a->size % k != 0 || a->pre * k > b.pre) {
            continue;
        }
        ax c = {a->axis, a->pre, k};
        if (ax_coexist(c, b)) {
            a->size = k;
            return true;
        }
    }
    return false;
}

/* The atom of axis ref r on mesh, by name (propagation's shardings point at
 * the mesh's own name strings, so pointer equality finds them first); a
 * sub-axis keeps its (pre, size) unchecked. False when the mesh has no such
 * axis. */
static inline bool ax_from_ref(const sp_mesh *mesh, const sp_axis_ref *r, ax *out)
{
    uint32_t i = 0;
    while (i < mesh->n_axes && mesh->axes[i].name != r->name) {
        i++;
    }
    if (i == mesh->n_axes) {
        i = 0;
    }
    for (; i < mesh->n_axes; i++) {
        if (mesh->axes[i].name == r->name || strcmp(mesh->axes[i].name, r->name) == 0) {
            out->axis = i;
            if (r->pre_size == 0) {
                out->pre = 1;
                out->size = mesh->axes[i].size;
            } else {
                out->pre = r->pre_size;
                out->size = r->size;
            }
            return true;
        }
    }
    return false;
}

#endif
