/* SPDX-License-Identifier: Apache-2.0
 * planner: Shardy's collectives. -sdy-reshard-to-collectives lowers each
 * sdy.reshard into sdy.all_slice / sdy.collective_permute / sdy.all_to_all /
 * sdy.all_gather (sdy_export_passes.md); the device groups ("replica groups")
 * of a collective over mesh axes as XLA forms them; per-device local shapes;
 * and -shardplan-annotate-device-groups, which attaches the groups to each
 * collective op as `sdy.device_groups` (an attribute of ours, not Shardy's).
 * All of it is in sp_reshard_to_collectives.c.
 * Ownership: results live in the arena or module the caller passes.
 * Thread contract: functions are reentrant; a module is used by one thread. */
#ifndef SP_COLLECTIVES_H
#define SP_COLLECTIVES_H

#include <stdbool.h>
#include <stdint.h>

#include "cm.h"
#include "sp_ir.h"
#include "sp_shard.h"

/* -sdy-reshard-to-collectives: replaces every sdy.reshard whose input and
 * output shardings live on meshes with the same axes (or where one side is
 * fully replicated) by the sequence of collectives Shardy emits, and removes
 * redundant reshards unless keep_redundant. Reshards between meshes with
 * different axes, or from/to a maximal (single-device) mesh, stay. Errors:
 * CM_ENOMEM (the module may then be partly rewritten). */
cm_status sp_pass_reshard_to_collectives(sp_module *m, bool keep_redundant, cm_error *err);

/* The device groups of a collective over the mesh axes axes[0..n) (full axes
 * or sub-axes "x":(pre)size; a full axis may have size 0, it is taken from
 * the mesh): the devices are split into groups that vary only along those
 * axes. Groups are ordered row-major over the remaining (non-collective) mesh
 * positions; inside a group devices are ordered by their position along the
 * collective axes, axes[0] most major. With explicit mesh device_ids each
 * position maps to device_ids[position], else to the position itself.
 * *groups_out receives n_groups * group_size ids (row-major), allocated in a.
 * n = 0 gives one-device groups. Errors: CM_EINVAL (unknown axis, bad or
 * overlapping sub-axis) with err->path "/axes/I"; CM_ENOMEM. */
cm_status sp_collective_groups(const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n,
                               int64_t **groups_out, uint32_t *n_groups, uint32_t *group_size,
                               cm_arena *a, cm_error *err);

/* The per-device shape of a tensor of rank dims sharded by s on mesh:
 * local_out[d] = ceil(dims[d] / product of the sizes of the axes sharding
 * dimension d); dynamic dims (SP_DIM_DYNAMIC) stay dynamic. s may be NULL
 * (replicated). Errors: CM_EINVAL (rank mismatch, unknown axis) with
 * err->path "/dims/D". */
cm_status sp_local_shape(const sp_sharding *s, const sp_mesh *mesh, const int64_t *dims,
                         uint32_t rank, int64_t *local_out, cm_error *err);

/* -shardplan-annotate-device-groups: sets `sdy.device_groups =
 * dense<[[...], ...]> : tensor<GxSxi64>` on every sdy.all_gather, all_slice,
 * all_to_all, all_reduce and reduce_scatter whose out_sharding names a known
 * mesh. The collective axes are the op's axes in order (dimension by
 * dimension, then parameter by parameter). Ops without axes get no
 * attribute. Errors: CM_ENOMEM. */
cm_status sp_pass_annotate_device_groups(sp_module *m, cm_error *err);

#endif /* SP_COLLECTIVES_H */
