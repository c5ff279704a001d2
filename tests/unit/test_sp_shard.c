/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_shard: Shardy mesh, sharding and rule text
 * round trips (corpus taken from Shardy's lit tests), parse and verify
 * errors with their paths, JAX einsum-like rules, and OOM loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_shard.h"
#include "tu_oom.h"

#define N_OF(x) (sizeof(x) / sizeof((x)[0]))

/* ---- corpus: attribute bodies printed by Shardy in its lit tests ---------- */

static const char *const corpus_sh[] = {
    "<@empty_mesh, [{?}, {?}]>",
    "<@empty_mesh, [{?}, {}]>",
    "<@empty_mesh, [{}, {}]>",
    "<@empty_mesh_another, [{}, {}]>",
    "<@maximal_mesh, []>",
    "<@mesh, [{\"a\", ?}, {\"b\", ?}]>",
    "<@mesh, [{\"a\"}, {\"b\"}]>",
    "<@mesh, [{\"x\", \"y\"}, {}]>",
    "<@mesh, [{\"x\":(1)2}, {\"x\":(2)2}]>",
    "<@mesh, [{\"x\":(1)2}, {\"y\"}]>",
    "<@mesh, [{\"x\":(2)2}, {\"x\":(1)2}]>",
    "<@mesh, [{\"x\":(2)2}, {\"y\"}]>",
    "<@mesh, [{\"x\"}, {\"y\"}, {}]>",
    "<@mesh, [{\"x\"}, {\"y\"}]>",
    "<@mesh, [{\"x\"}, {}, {\"y\"}]>",
    "<@mesh, [{\"x\"}, {}, {}]>",
    "<@mesh, [{\"x\"}, {}]>",
    "<@mesh, [{\"y\", \"x\"}, {}]>",
    "<@mesh, [{\"y\"}, {\"x\":(1)2}]>",
    "<@mesh, [{\"y\"}, {\"x\":(2)2}]>",
    "<@mesh, [{\"y\"}, {\"x\"}]>",
    "<@mesh, [{\"y\"}, {}]>",
    "<@mesh, [{}, {\"x\":(2)2}]>",
    "<@mesh, [{}, {\"x\"}, {\"y\"}]>",
    "<@mesh, [{}, {\"x\"}]>",
    "<@mesh, [{}, {\"y\"}]>",
    "<@mesh, [{}, {}]>",
    "<@mesh1d_6, [{\"x\":(1)2}, {}]>",
    "<@mesh1d_6, [{\"x\":(1)3}, {}]>",
    "<@mesh1d_6, [{\"x\":(2)3}, {}]>",
    "<@mesh1d_6, [{\"x\"}, {}]>",
    "<@mesh1d_6, [{}, {\"x\":(1)3}]>",
    "<@mesh1d_6, [{}, {}]>",
    "<@mesh2d, [{\"x\", \"y\"}, {}, {}]>",
    "<@mesh2d, [{\"x\", \"y\"}, {}]>",
    "<@mesh2d, [{\"x\", ?}, {\"y\", ?}]>",
    "<@mesh2d, [{\"x\"}, {\"y\"}, {}]>",
    "<@mesh2d, [{\"x\"}, {\"y\"}]>",
    "<@mesh2d, [{\"x\"}, {}]>",
    "<@mesh2d, [{\"y\", \"x\"}, {}, {}]>",
    "<@mesh2d, [{\"y\"}, {\"x\"}, {}]>",
    "<@mesh2d, [{\"y\"}, {\"x\"}]>",
    "<@mesh2d, [{\"y\"}, {}, {}]>",
    "<@mesh2d, [{\"y\"}, {}]>",
    "<@mesh2d, [{}, {\"x\", \"y\"}, {}]>",
    "<@mesh2d, [{}, {\"x\"}, {\"y\"}]>",
    "<@mesh2d, [{}, {\"x\"}]>",
    "<@mesh2d, [{}, {\"y\", \"x\"}, {}]>",
    "<@mesh2d, [{}, {\"y\"}]>",
    "<@mesh2d, [{}, {}]>",
    "<@mesh2d_2x3, [{\"x\", \"y\"}, {}]>",
    "<@mesh2d_2x3, [{\"x\"}, {\"y\"}]>",
    "<@mesh2d_2x3, [{\"x\"}, {}]>",
    "<@mesh2d_2x3, [{\"y\", \"x\"}, {}]>",
    "<@mesh2d_2x3, [{\"y\"}, {\"x\"}]>",
    "<@mesh2d_2x3, [{\"y\"}, {}]>",
    "<@mesh2d_2x3, [{}, {\"x\", \"y\"}]>",
    "<@mesh2d_2x3, [{}, {\"y\", \"x\"}]>",
    "<@mesh2d_2x3, [{}, {}]>",
    "<@mesh2d_2x8, [{\"y\":(1)4}, {\"x\"}]>",
    "<@mesh2d_2x8, [{\"y\"}, {\"x\"}]>",
    "<@mesh2d_4x2, [{\"x\"}, {\"y\"}]>",
    "<@mesh2d_4x2, [{\"x\"}, {}]>",
    "<@mesh2d_4x2, [{\"y\", \"x\":(2)2}, {\"x\":(1)2}]>",
    "<@mesh2d_4x2, [{\"y\"}, {\"x\"}]>",
    "<@mesh2d_4x2, [{\"y\"}, {}]>",
    "<@mesh2d_4x2, [{}, {\"x\"}]>",
    "<@mesh2d_4x2, [{}, {\"y\"}]>",
    "<@mesh2d_4x6, [{\"x\", \"y\":(1)3}, {}]>",
    "<@mesh2d_4x6, [{\"x\", \"y\":(2)3}, {\"y\":(1)2}]>",
    "<@mesh2d_4x6, [{\"x\"}, {\"y\":(1)2}]>",
    "<@mesh2d_4x6, [{\"x\"}, {}]>",
    "<@mesh2d_4x6, [{\"y\", \"x\":(1)2}, {\"x\":(2)2}]>",
    "<@mesh2d_4x6, [{\"y\", \"x\":(1)2}, {}]>",
    "<@mesh2d_4x6, [{\"y\"}, {}]>",
    "<@mesh2d_non_iota, [{\"x\", \"y\"}, {}]>",
    "<@mesh2d_non_iota, [{\"x\"}, {\"y\"}, {}]>",
    "<@mesh2d_non_iota, [{\"x\"}, {\"y\"}]>",
    "<@mesh2d_non_iota, [{\"x\"}, {}, {\"y\"}]>",
    "<@mesh2d_non_iota, [{\"x\"}, {}]>",
    "<@mesh2d_non_iota, [{\"y\", \"x\"}, {}]>",
    "<@mesh2d_non_iota, [{}, {\"y\", \"x\"}, {}]>",
    "<@mesh2d_non_iota, [{}, {}]>",
    "<@mesh2d_non_iota_2, [{\"x\", \"y\"}, {}]>",
    "<@mesh2d_non_iota_2, [{}, {\"x\", \"y\"}]>",
    "<@mesh3d, [{\"x\", \"y\", \"z\"}, {}]>",
    "<@mesh3d, [{\"x\", \"y\"}, {\"z\"}]>",
    "<@mesh3d, [{\"x\", \"y\"}, {}]>",
    "<@mesh3d, [{\"x\", \"z\"}, {\"y\"}]>",
    "<@mesh3d, [{\"x\"}, {\"y\", \"z\"}, {}]>",
    "<@mesh3d, [{\"x\"}, {\"y\", \"z\"}]>",
    "<@mesh3d, [{\"x\"}, {\"y\"}, {\"z\"}]>",
    "<@mesh3d, [{\"x\"}, {\"y\"}, {}]>",
    "<@mesh3d, [{\"x\"}, {\"y\"}]>",
    "<@mesh3d, [{\"x\"}, {}, {\"y\", \"z\"}]>",
    "<@mesh3d, [{\"x\"}, {}]>",
    "<@mesh3d, [{\"y\", \"x\", \"z\"}, {}]>",
    "<@mesh3d, [{\"y\", \"z\"}, {\"x\"}, {}]>",
    "<@mesh3d, [{\"y\", \"z\"}, {\"x\"}]>",
    "<@mesh3d, [{\"y\", \"z\"}, {}, {\"x\"}]>",
    "<@mesh3d, [{\"y\", \"z\"}, {}], unreduced={\"x\"}>",
    "<@mesh3d, [{\"y\"}, {\"x\", \"z\"}, {}]>",
    "<@mesh3d, [{\"y\"}, {\"x\", \"z\"}]>",
    "<@mesh3d, [{\"y\"}, {\"x\"}, {}]>",
    "<@mesh3d, [{\"y\"}, {\"x\"}]>",
    "<@mesh3d, [{\"y\"}, {}, {\"x\"}]>",
    "<@mesh3d, [{\"z\", \"x\", \"y\"}, {}]>",
    "<@mesh3d, [{\"z\", \"x\"}, {\"y\"}]>",
    "<@mesh3d, [{\"z\", \"y\", \"x\"}, {}]>",
    "<@mesh3d, [{\"z\", \"y\"}, {\"x\"}]>",
    "<@mesh3d, [{\"z\", \"y\"}, {}], unreduced={\"x\"}>",
    "<@mesh3d, [{\"z\", \"y\"}, {}]>",
    "<@mesh3d, [{\"z\"}, {\"x\", \"y\"}, {}]>",
    "<@mesh3d, [{\"z\"}, {\"x\"}, {}]>",
    "<@mesh3d, [{\"z\"}, {\"x\"}]>",
    "<@mesh3d, [{\"z\"}, {\"y\"}], unreduced={\"x\"}>",
    "<@mesh3d, [{\"z\"}, {\"y\"}]>",
    "<@mesh3d, [{\"z\"}, {}, {\"x\", \"y\"}]>",
    "<@mesh3d, [{\"z\"}, {}]>",
    "<@mesh3d, [{}, {\"x\", \"y\", \"z\"}, {}]>",
    "<@mesh3d, [{}, {\"x\", \"y\"}, {\"z\"}]>",
    "<@mesh3d, [{}, {\"x\", \"y\"}, {}]>",
    "<@mesh3d, [{}, {\"x\", \"z\"}, {\"y\"}]>",
    "<@mesh3d, [{}, {\"x\", \"z\"}]>",
    "<@mesh3d, [{}, {\"x\"}, {\"y\", \"z\"}]>",
    "<@mesh3d, [{}, {\"x\"}, {\"z\", \"y\"}]>",
    "<@mesh3d, [{}, {\"x\"}, {\"z\"}]>",
    "<@mesh3d, [{}, {\"x\"}, {}]>",
    "<@mesh3d, [{}, {\"x\"}]>",
    "<@mesh3d, [{}, {\"y\", \"z\"}, {\"x\"}]>",
    "<@mesh3d, [{}, {\"y\"}, {\"x\"}]>",
    "<@mesh3d, [{}, {\"y\"}], unreduced={\"x\"}>",
    "<@mesh3d, [{}, {\"y\"}]>",
    "<@mesh3d, [{}, {\"z\"}, {\"x\", \"y\"}]>",
    "<@mesh3d, [{}, {}, {\"x\", \"y\", \"z\"}]>",
    "<@mesh3d, [{}, {}, {\"x\", \"y\"}]>",
    "<@mesh3d, [{}, {}, {}]>",
    "<@mesh3d, [{}, {}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"y\", \"z\"}, {}, {}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"y\"}, {\"z\"}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"y\"}, {}, {\"z\"}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"z\":(1)2}, {\"y\", \"z\":(2)2}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"z\":(2)2}, {\"z\":(1)2}, {\"y\"}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"z\":(2)2}, {}, {\"y\"}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"z\"}, {\"y\"}, {}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"z\"}, {\"y\"}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"z\"}, {}, {\"y\"}]>",
    "<@mesh3d_4x2x4, [{\"x\", \"z\"}, {}]>",
    "<@mesh3d_4x2x4, [{\"x\"}, {\"y\", \"z\"}, {}]>",
    "<@mesh3d_4x2x4, [{\"x\"}, {\"y\"}, {}]>",
    "<@mesh3d_4x2x4, [{\"x\"}, {\"z\", \"y\"}, {}]>",
    "<@mesh3d_4x2x4, [{\"x\"}, {\"z\"}, {\"y\"}]>",
    "<@mesh3d_4x2x4, [{\"x\"}, {}, {\"y\"}]>",
    "<@mesh3d_4x2x4, [{\"y\", \"x\":(2)2, \"z\"}, {}]>",
    "<@mesh3d_4x2x4, [{\"y\", \"x\"}, {\"z\"}]>",
    "<@mesh3d_4x2x4, [{\"y\", \"z\"}, {\"x\"}]>",
    "<@mesh3d_4x2x4, [{\"y\"}, {}]>",
    "<@mesh3d_4x2x4, [{\"z\", \"x\":(2)2}, {\"y\", \"x\":(1)2}]>",
    "<@mesh3d_4x2x4, [{\"z\", \"y\"}, {\"x\"}]>",
    "<@mesh3d_4x2x4, [{\"z\"}, {\"x\"}]>",
    "<@mesh3d_4x2x4, [{\"z\"}, {\"y\", \"x\":(1)2}]>",
    "<@mesh3d_4x2x4, [{\"z\"}, {\"y\", \"x\":(2)2}]>",
    "<@mesh3d_4x2x4, [{\"z\"}, {\"y\", \"x\"}, {}]>",
    "<@mesh3d_4x2x4, [{\"z\"}, {\"y\"}]>",
    "<@mesh3d_4x2x4, [{}, {\"x\", \"y\", \"z\"}, {}]>",
    "<@mesh3d_4x2x4, [{}, {\"x\", \"y\"}, {\"z\"}]>",
    "<@mesh3d_4x2x4, [{}, {\"x\", \"z\", \"y\"}, {}]>",
    "<@mesh3d_4x2x4, [{}, {\"y\", \"x\"}, {}]>",
    "<@mesh3d_4x2x4, [{}, {\"y\", \"z\", \"x\"}, {}]>",
    "<@mesh3d_4x2x4, [{}, {\"y\", \"z\"}, {}]>",
    "<@mesh3d_4x6x2, [{\"x\", \"y\":(1)3}, {\"z\"}]>",
    "<@mesh3d_4x6x2, [{\"x\"}, {\"z\"}]>",
    "<@mesh3d_4x6x2, [{\"y\", \"x\":(1)2}, {\"z\"}]>",
    "<@mesh3d_4x6x2, [{\"y\"}, {}]>",
    "<@mesh3d_4x6x5, [{\"x\", \"y\":(1)3}, {\"z\"}]>",
    "<@mesh3d_4x6x5, [{\"x\"}, {\"z\"}]>",
    "<@mesh3d_4x6x5, [{\"y\", \"x\":(1)2}, {\"z\"}]>",
    "<@mesh3d_4x6x5, [{\"y\"}, {}]>",
    "<@mesh4d, [{\"w\", \"y\", \"z\"}, {}]>",
    "<@mesh4d, [{\"w\"}, {\"x\", \"y\"}, {}]>",
    "<@mesh4d, [{\"w\"}, {}, {\"x\", \"y\"}]>",
    "<@mesh4d, [{\"x\", \"y\", \"z\"}, {\"w\"}]>",
    "<@mesh4d, [{\"x\", \"y\", \"z\"}, {}]>",
    "<@mesh4d, [{\"x\"}, {\"w\", \"y\", \"z\"}]>",
    "<@mesh4d, [{\"x\"}, {\"z\", \"w\", \"y\"}]>",
    "<@mesh4d, [{\"y\"}, {\"z\", \"w\"}, {\"x\"}]>",
    "<@mesh4d, [{\"z\", \"w\"}, {\"x\", \"y\"}, {}]>",
    "<@mesh4d, [{\"z\", \"w\"}, {}, {\"x\", \"y\"}]>",
    "<@mesh4d, [{\"z\"}, {\"x\", \"y\"}, {\"w\"}]>",
    "<@mesh4d, [{\"z\"}, {\"x\", \"y\"}, {}]>",
    "<@mesh4d, [{\"z\"}, {\"x\"}, {}]>",
    "<@mesh4d, [{}, {\"z\", \"w\", \"y\"}]>",
    "<@mesh4d, [{}, {\"z\", \"w\"}, {\"x\", \"y\"}]>",
    "<@mesh4d, [{}, {}, {\"x\", \"y\", \"z\", \"w\"}]>",
    "<@mesh4d_w16, [{\"y\", \"w\":(4)2, \"z\", \"w\":(1)2}, {\"x\", \"w\":(2)2, \"w\":(8)2}]>",
    "<@mesh4d_w16, [{\"y\", \"w\":(4)2, \"z\", \"w\":(1)2}, {}]>",
    "<@mesh4d_w16, [{\"y\", \"z\", \"w\":(1)2, \"w\":(8)2}, {\"x\", \"w\":(2)4}]>",
    "<@mesh4d_w16, [{\"y\", \"z\", \"w\":(1)2}, {\"x\", \"w\":(2)8}]>",
    "<@mesh4d_w16, [{\"y\", \"z\", \"w\":(4)4}, {\"x\", \"w\":(1)4}]>",
    "<@mesh4d_w16, [{\"y\", \"z\"}, {\"x\", \"w\"}]>",
    "<@mesh4d_w16, [{\"y\"}, {\"x\", \"w\":(2)8}]>",
    "<@mesh4d_w16, [{\"y\"}, {\"x\", \"w\"}]>",
    "<@mesh4d_w4, [{\"w\"}, {}]>",
    "<@mesh4d_w4, [{\"y\", \"w\":(1)2, \"z\", \"w\":(2)2}, {\"x\"}]>",
    "<@mesh4d_w4, [{\"y\", \"w\":(1)2, \"z\", \"w\":(2)2}, {}]>",
    "<@mesh4d_w4, [{\"y\", \"z\", \"w\":(1)2}, {}]>",
    "<@mesh4d_w4, [{\"y\", \"z\", \"w\":(2)2}, {\"x\", \"w\":(1)2}]>",
    "<@mesh4d_w4, [{\"y\", \"z\", \"w\":(2)2}, {}]>",
    "<@mesh4d_w4, [{\"y\", \"z\", \"w\"}, {\"x\"}]>",
    "<@mesh4d_w4, [{\"y\", \"z\", \"w\"}, {}]>",
    "<@mesh4d_w4, [{\"y\", \"z\"}, {\"x\", \"w\"}]>",
    "<@mesh4d_w4, [{\"y\"}, {\"x\", \"w\"}]>",
    "<@mesh4d_w4, [{}, {\"w\":(1)2}]>",
    "<@mesh4d_w4, [{}, {\"w\"}]>",
    "<@mesh4d_z4, [{\"x\", \"z\":(2)2, \"w\"}, {\"z\":(1)2}, {\"y\"}]>",
    "<@mesh4d_z4, [{\"x\", \"z\":(2)2, \"w\"}, {}, {\"y\"}]>",
    "<@mesh4d_z4, [{\"x\"}, {\"y\", \"z\", \"w\"}, {}]>",
    "<@mesh4d_z4, [{\"x\"}, {\"z\", \"w\", \"y\"}, {}]>",
    "<@mesh4d_z4, [{\"x\"}, {\"z\", \"w\"}, {\"y\"}]>",
    "<@mesh6d, [{\"x\"}, {\"y\", \"z\"}, {\"w\", \"u\"}, {\"v\"}]>",
    "<@mesh6d, [{\"x\"}, {\"y\", \"z\"}, {}, {}]>",
    "<@mesh6d, [{}, {}, {\"w\", \"u\"}, {\"v\"}]>",
    "<@mesh_a_16_b_2, [{\"a\", ?}, {?}]>",
    "<@mesh_a_16_b_2, [{\"a\", ?}]>",
    "<@mesh_a_16_b_2, [{\"a\":(1)2, ?}, {\"a\":(2)4, ?}, {\"a\":(8)2, ?}]>",
    "<@mesh_a_16_b_2, [{\"a\":(1)2, ?}, {\"a\":(2)8, ?}]>",
    "<@mesh_a_16_b_2, [{\"a\":(1)2, ?}, {\"a\":(4)2, ?}]>",
    "<@mesh_a_16_b_2, [{\"a\":(1)4, ?}, {\"a\":(4)2, ?}, {\"a\":(8)2, ?}]>",
    "<@mesh_a_16_b_2, [{\"a\":(1)4, ?}, {\"a\":(4)2, ?}]>",
    "<@mesh_a_16_b_2, [{\"a\":(1)4, ?}, {\"a\":(4)4, ?}]>",
    "<@mesh_a_16_b_2, [{\"a\":(1)4, ?}, {\"b\", ?}]>",
    "<@mesh_a_16_b_2, [{\"a\":(1)8, ?}, {\"a\":(8)2, ?}]>",
    "<@mesh_a_16_b_2, [{\"a\"}]>",
    "<@mesh_a_16_b_2, [{?}, {\"b\", ?}]>",
    "<@mesh_a_1_b_2_c_1, [{\"a\", \"b\", \"c\", ?}, {?}, {?}]>",
    "<@mesh_a_1_b_2_c_1, [{\"a\", \"b\", \"c\"}]>",
    "<@mesh_a_1_b_2_c_1, [{?}, {\"a\", ?}]>",
    "<@mesh_a_1_b_2_c_1, [{}, {\"a\"}]>",
    "<@mesh_a_1_b_2_c_1_d_2, [{\"d\", ?}, {\"a\", \"b\", \"c\"}]>",
    "<@mesh_a_1_b_2_c_1_d_2, [{\"d\"}, {\"a\", \"b\", \"c\", ?}]>",
    "<@mesh_a_1_b_2_c_1_d_2, [{\"d\"}, {?}]>",
    "<@mesh_a_1_b_2_c_1_d_2, [{?}, {\"a\", \"b\", \"c\"}]>",
    "<@mesh_a_2_b_2, []>",
    "<@mesh_a_2_b_2, [{\"a\", \"b\", ?}, {?}]>",
    "<@mesh_a_2_b_2, [{\"a\", \"b\", ?}]>",
    "<@mesh_a_2_b_2, [{\"a\", \"b\"}, {}]>",
    "<@mesh_a_2_b_2, [{\"a\", ?}, {\"b\", ?}]>",
    "<@mesh_a_2_b_2, [{\"a\", ?}, {?}]>",
    "<@mesh_a_2_b_2, [{\"a\", ?}, {}]>",
    "<@mesh_a_2_b_2, [{\"a\", ?}]>",
    "<@mesh_a_2_b_2, [{\"a\"}, {\"b\"}]>",
    "<@mesh_a_2_b_2, [{\"a\"}, {?}]>",
    "<@mesh_a_2_b_2, [{\"a\"}, {}]>",
    "<@mesh_a_2_b_2, [{\"a\"}]>",
    "<@mesh_a_2_b_2, [{\"b\", \"a\", ?}, {?}]>",
    "<@mesh_a_2_b_2, [{\"b\", \"a\", ?}, {}]>",
    "<@mesh_a_2_b_2, [{\"b\", \"a\"}, {}]>",
    "<@mesh_a_2_b_2, [{\"b\", \"a\"}]>",
    "<@mesh_a_2_b_2, [{\"b\", ?}, {\"a\", ?}]>",
    "<@mesh_a_2_b_2, [{\"b\", ?}, {?}]>",
    "<@mesh_a_2_b_2, [{\"b\", ?}, {}]>",
    "<@mesh_a_2_b_2, [{\"b\"}, {\"a\"}]>",
    "<@mesh_a_2_b_2, [{?}, {\"b\", ?}]>",
    "<@mesh_a_2_b_2, [{?}, {?}, {\"b\", ?}]>",
    "<@mesh_a_2_b_2, [{?}, {?}], replicated={\"a\"}>",
    "<@mesh_a_2_b_2, [{?}, {?}]>",
    "<@mesh_a_2_b_2, [{?}]>",
    "<@mesh_a_2_b_2, [{}, {\"b\", ?}]>",
    "<@mesh_a_2_b_2, [{}, {\"b\"}]>",
    "<@mesh_a_2_b_2, [{}, {?}]>",
    "<@mesh_a_2_b_2, [{}, {}, {\"b\"}]>",
    "<@mesh_a_2_b_2_c_2, [{\"a\", \"b\", ?}, {\"c\", ?}]>",
    "<@mesh_a_2_b_2_c_2, [{\"a\", \"b\", ?}, {?}]>",
    "<@mesh_a_2_b_2_c_2, [{\"a\", \"b\"}, {}]>",
    "<@mesh_a_2_b_2_c_2, [{\"a\", \"c\", ?}, {?}]>",
    "<@mesh_a_2_b_2_c_2, [{\"a\", ?}, {\"c\", ?}]>",
    "<@mesh_a_2_b_2_c_2, [{\"a\",\"b\",?}, {?}]>",
    "<@mesh_a_2_b_2_c_2, [{\"a\"}, {\"b\"}, {\"c\"}]>",
    "<@mesh_a_2_b_2_c_2, [{\"b\", \"a\"}, {}]>",
    "<@mesh_a_2_b_2_c_2, [{\"b\", \"c\"}, {}]>",
    "<@mesh_a_2_b_2_c_2, [{\"b\", ?}, {?}]>",
    "<@mesh_a_2_b_2_c_2, [{?}, {\"b\", ?}, {?}]>",
    "<@mesh_a_2_b_3, [{\"a\", \"b\", ?}]>",
    "<@mesh_a_2_b_3, [{\"a\"}, {\"b\"}]>",
    "<@mesh_a_2_b_3, [{\"b\"}, {\"a\", ?}, {?}]>",
    "<@mesh_a_2_b_3, [{\"b\"}, {?}, {?}]>",
    "<@mesh_a_2_b_3, [{?}, {\"a\", \"b\", ?}]>",
    "<@mesh_a_2_b_3_c_2_d_2, [{\"c\", ?}, {\"d\"}, {\"a\", ?}, {?}]>",
    "<@mesh_a_2_b_3_c_2_d_2, [{\"c\"}, {\"d\", ?}, {\"a\", \"b\"}]>",
    "<@mesh_a_2_b_3_c_2_d_2, [{\"c\"}, {?}, {\"a\", \"b\"}]>",
    "<@mesh_a_2_b_3_c_2_d_2, [{\"d\", ?}, {\"a\", \"b\", ?}]>",
    "<@mesh_a_2_b_3_c_2_d_2, [{\"d\"}, {\"a\", ?}, {\"c\"}]>",
    "<@mesh_a_2_b_3_c_2_d_2, [{\"d\"}, {?}, {\"c\"}]>",
    "<@mesh_a_2_b_3_c_2_d_2, [{?}, {\"a\", \"b\", ?}]>",
    "<@mesh_a_2_b_3_c_2_d_2, [{?}, {\"d\"}, {?}, {?}]>",
    "<@mesh_a_3, [{\"a\", ?}, {?}]>",
    "<@mesh_a_3, [{\"a\"}, {?}]>",
    "<@mesh_a_3, [{\"a\"}, {}]>",
    "<@mesh_a_3, [{\"a\"}]>",
    "<@mesh_a_3, [{?}, {\"a\", ?}]>",
    "<@mesh_a_3, [{}, {\"a\"}]>",
    "<@mesh_a_3_another, [{\"a\"}, {?}]>",
    "<@mesh_a_3_b_3, [{\"a\", \"b\"}, {}]>",
    "<@mesh_a_3_b_3, [{\"a\", ?}]>",
    "<@mesh_a_4_b_2, [{\"a\", ?}, {?}]>",
    "<@mesh_a_4_b_2, [{\"a\", ?}, {}]>",
    "<@mesh_a_4_b_2, [{\"a\":(1)2, ?}, {\"a\":(2)2, ?}]>",
    "<@mesh_a_4_b_2, [{\"a\":(1)2, ?}, {}]>",
    "<@mesh_a_4_b_2, [{\"a\"}, {}]>",
    "<@mesh_a_4_b_2, [{\"a\"}]>",
    "<@mesh_a_4_b_2_c_2, [{\"b\", \"a\":(1)2, \"c\", ?}]>",
    "<@mesh_a_4_b_2_c_2, [{\"b\", \"a\":(1)2, ?}]>",
    "<@mesh_a_4_b_2_c_2, [{\"b\", \"a\"}, {\"c\"}]>",
    "<@mesh_a_4_b_2_c_2, [{\"b\", \"a\"}, {}]>",
    "<@mesh_a_4_b_2_c_2, [{\"c\", \"a\"}, {\"b\"}]>",
    "<@mesh_a_4_b_2_c_2, [{\"c\", ?}, {\"a\", \"b\", ?}]>",
    "<@mesh_a_4_b_4, [{\"a\", \"b\"}]>",
    "<@mesh_a_4_b_4, [{\"a\":(1)2, ?}, {\"a\":(2)2, \"b\", ?}]>",
    "<@mesh_a_6, [{\"a\":(1)2, ?}, {\"a\":(2)3, ?}]>",
    "<@mesh_a_6, [{\"a\":(1)2}, {}]>",
    "<@mesh_a_6, [{\"a\"}]>",
    "<@mesh_a_6, [{?}, {\"a\":(3)2, ?}]>",
    "<@mesh_a_6, [{?}, {?}]>",
    "<@mesh_a_6, [{}, {\"a\":(3)2}]>",
    "<@mesh_a_6_b_2, [{\"b\", ?}, {\"a\"}]>",
    "<@mesh_a_6_b_2, [{\"b\"}, {\"a\":(1)2, ?}, {?}]>",
    "<@mesh_a_6_b_2, [{\"b\"}, {?}, {?}]>",
    "<@mesh_a_6_b_2, [{?}, {\"a\"}]>",
    "<@mesh_x16_y4_z2, [{\"y\"}, {\"x\", \"z\"}, {}]>",
    "<@mesh_x16_y4_z2, [{}, {\"x\"}]>",
    "<@mesh_x16_y4_z2, [{}, {\"y\", \"z\"}, {\"x\"}]>",
    "<@mesh_x16_y4_z2, [{}, {\"y\", \"z\"}, {}]>",
    "<@mesh_xyz, [{\"x\", \"y\"}, {\"z\"}, {}]>",
    "<@mesh_xyz, [{\"x\":(1)2}, {\"x\":(2)2}]>",
    "<@mesh_xyz, [{\"x\"}, {\"z\"}, {\"y\"}]>",
    "<@mesh_xyz, [{\"x\"}, {}, {}]>",
    "<@mesh_xyz, [{\"x\"}, {}]>",
    "<@mesh_xyz, [{\"y\", \"x\":(1)2}, {\"x\":(2)2}, {}]>",
    "<@mesh_xyz, [{\"y\", \"x\":(1)2}, {}, {}]>",
    "<@mesh_xyz, [{\"y\", \"x\"}, {}, {}]>",
    "<@mesh_xyz, [{\"y\"}, {\"x\", \"z\"}, {}]>",
    "<@mesh_xyz, [{\"y\"}, {}, {\"x\", \"z\"}]>",
    "<@mesh_xyz, [{\"y\"}, {}, {}]>",
    "<@mesh_xyz, [{\"y\"}, {}]>",
    "<@mesh_xyz, [{\"z\":(1)2}, {\"x\", \"y\", \"z\":(2)2}]>",
    "<@mesh_xyz, [{\"z\"}, {\"x\", \"y\"}]>",
    "<@mesh_xyz, [{\"z\"}, {}, {}]>",
    "<@mesh_xyz, [{}, {\"x\", \"y\", \"z\":(2)2}]>",
    "<@mesh_xyz, [{}, {\"x\", \"y\"}]>",
    "<@mesh_xyz, [{}, {\"x\":(2)2}, {}]>",
    "<@mesh_xyz, [{}, {\"x\"}]>",
    "<@mesh_xyz, [{}, {\"y\"}, {\"x\", \"z\"}]>",
    "<@mesh_xyz, [{}, {\"z\", \"x\":(2)2}]>",
    "<@mesh_xyz, [{}, {\"z\":(1)2}]>",
    "<@mesh_xyz, [{}, {\"z\"}]>",
    "<@mesh_xyz, [{}, {}, {}]>",
    "<@mesh_xyz, [{}, {}]>",
    "<@mesh_xyzt, [{\"x\"}, {\"z\", \"t\"}]>",
    "<@mesh_xyzt, [{\"x\"}, {\"z\"}, {\"t\"}]>",
    "<@mesh_xyzt, [{\"y\", \"x\":(1)2, \"t\":(1)2}, {\"t\":(2)2}, {}]>",
    "<@mesh_xyzt, [{\"y\", \"x\":(1)2, \"t\":(2)2}, {}, {\"t\":(1)2}]>",
    "<@mesh_xyzt, [{\"y\", \"x\":(1)2, \"t\":(2)2}, {}, {}]>",
    "<@mesh_xyzt, [{\"y\":(1)2}, {\"x\"}, {}]>",
    "<@mesh_xyzt, [{\"y\":(1)2}, {}, {}]>",
    "<@mesh_xyzt, [{\"y\":(2)2}, {\"x\", \"y\":(1)2}, {}]>",
    "<@mesh_xyzt, [{\"y\":(2)2}, {\"y\":(1)2}, {}]>",
    "<@mesh_xyzt, [{\"y\":(2)2}, {}, {}]>",
    "<@mesh_xyzt, [{\"z\"}, {\"t\"}, {\"x\", \"y\"}]>",
    "<@mesh_xyzt, [{}, {\"t\":(2)2}, {\"t\":(1)2}]>",
    "<@mesh_xyzt, [{}, {\"x\", \"y\", \"z\"}, {}]>",
    "<@mesh_xyzt, [{}, {\"x\", \"y\"}]>",
    "<@mesh_xyzt, [{}, {\"y\"}, {}]>",
    "<@mesh_xyzt, [{}, {\"z\"}, {\"t\"}]>",
    "<@single_dev_0, []>",
};
static const char *const corpus_me[] = {
    "<[\"a\"=1, \"b\"=2, \"c\"=1, \"d\"=2]>",
    "<[\"a\"=1, \"b\"=2, \"c\"=1]>",
    "<[\"a\"=16, \"b\"=2]>",
    "<[\"a\"=2, \"b\"=2, \"c\"=2]>",
    "<[\"a\"=2, \"b\"=2]>",
    "<[\"a\"=2, \"b\"=3, \"c\"=2, \"d\"=2]>",
    "<[\"a\"=2, \"b\"=3]>",
    "<[\"a\"=3, \"b\"=3]>",
    "<[\"a\"=3]>",
    "<[\"a\"=4, \"b\"=2, \"c\"=2]>",
    "<[\"a\"=4, \"b\"=2]>",
    "<[\"a\"=4, \"b\"=4]>",
    "<[\"a\"=6, \"b\"=2]>",
    "<[\"a\"=6]>",
    "<[\"x\"=16, \"y\"=4, \"z\"=2]>",
    "<[\"x\"=2, \"y\"=2, \"z\"=2, \"w\"=16]>",
    "<[\"x\"=2, \"y\"=2, \"z\"=2, \"w\"=2, \"u\"=2, \"v\"=2]>",
    "<[\"x\"=2, \"y\"=2, \"z\"=2, \"w\"=2]>",
    "<[\"x\"=2, \"y\"=2, \"z\"=2, \"w\"=4]>",
    "<[\"x\"=2, \"y\"=2, \"z\"=2]>",
    "<[\"x\"=2, \"y\"=2, \"z\"=4, \"w\"=2]>",
    "<[\"x\"=2, \"y\"=2], device_ids=[3, 1, 2, 0]>",
    "<[\"x\"=2, \"y\"=2], device_ids=[3, 2, 1, 0]>",
    "<[\"x\"=2, \"y\"=2]>",
    "<[\"x\"=2, \"y\"=3]>",
    "<[\"x\"=2, \"y\"=8]>",
    "<[\"x\"=4, \"y\"=2, \"z\"=4]>",
    "<[\"x\"=4, \"y\"=2]>",
    "<[\"x\"=4, \"y\"=4, \"z\"=4, \"t\"=8]>",
    "<[\"x\"=4, \"y\"=6, \"z\"=2]>",
    "<[\"x\"=4, \"y\"=6, \"z\"=5]>",
    "<[\"x\"=4, \"y\"=6]>",
    "<[\"x\"=6]>",
    "<[], device_ids=[0]>",
    "<[]>",
};
static const char *const corpus_ru[] = {
    "<([])->([i, j, k]) {i=2, j=1, k=13}>",
    "<([], [])->([])>",
    "<([], [i, j], [])->([i, j]) {i=4, j=8}>",
    "<([], [i, j], [i, j])->([i, j]) {i=4, j=8}>",
    "<([i, j, k, l, o, n], [m, n, o, j, i])->([i, j, k, l, m]) {i=2, j=4, k=8, l=4, m=16, n=32, "
    "o=64} reduction={n, o}>",
    "<([i, j, k, l])->([i, j, k, l]) {i=2, j=4, k=8, l=8} need_replication={k, l}>",
    "<([i, j, k, l])->([i, j, k, l]) {i=4, j=32, k=8, l=2} permutation={j, l}>",
    "<([i, j, k, l], [])->([i, k, l]) {i=2, j=64, k=1, l=13} reduction={j}>",
    "<([i, j, k, l], [k], [k], [k], [k])->([i, j, k, l]) {i=4, j=8, k=16, l=32}>",
    "<([i, j, k])->([i, j, k]) {i=1, j=4, k=1} need_replication={j} blocked_propagation={j}>",
    "<([i, j, k])->([i, j, k]) {i=32, j=4, k=8} permutation={j, k}>",
    "<([i, j, k])->([i, j, k]) {i=4, j=2, k=2}>",
    "<([i, j, k])->([i, j, k]) {i=8, j=32, k=33} need_replication={j, k} blocked_propagation={k}>",
    "<([i, j, k])->([i, j, k]) {i=8, j=32, k=33} need_replication={k} blocked_propagation={k}>",
    "<([i, j, k])->([i, j, k]) {i=8, j=32, k=64} need_replication={j, k} blocked_propagation={k}>",
    "<([i, j, k])->([i, j, k]) {i=8, j=32, k=64} need_replication={j, k}>",
    "<([i, j, k])->([i, j, k]) {i=8, j=32, k=64} need_replication={k} blocked_propagation={k}>",
    "<([i, j, k])->([i, j, k]) {i=8, j=32, k=64} need_replication={k}>",
    "<([i, j, k])->([i, j, k]) {i=8, j=8, k=8} need_replication={j, k} blocked_propagation={i, k}, "
    "custom>",
    "<([i, j, k])->([i, j, k], [i, k]) {i=8, j=4, k=4}>",
    "<([i, j, k])->([i, j, k], [i, l]) {i=8, j=5, k=3, l=3} need_replication={j, k, l}>",
    "<([i, j, k])->([i, j]) {i=4, j=2, k=2} need_replication={k}>",
    "<([i, j, k], [])->([i, j, k]) {i=28, j=28, k=16} permutation={i, j}>",
    "<([i, j, k], [])->([i, k]) {i=2, j=64, k=13} reduction={j}>",
    "<([i, j, k], [], [], [])->([i, j, k]) {i=32, j=4, k=8} need_replication={j, k} "
    "blocked_propagation={j, k}>",
    "<([i, j, k], [i, j, k])->([i, j, k]) {i=2, j=0, k=4}>",
    "<([i, j, k], [i, j, k])->([i, j, k]) {i=2, j=1, k=4}>",
    "<([i, j, k], [i, j, k])->([i, j, k]) {i=4, j=32, k=256} need_replication={j}>",
    "<([i, j, k], [i, j, k])->([i, j, k]) {i=4, j=48, k=256} need_replication={j}>",
    "<([i, j, k], [i, j, k])->([i, j, k]) {i=4, j=8, k=256} need_replication={j}>",
    "<([i, j, k], [i, j, k])->([i, j, k]) {i=4, j=80, k=256} need_replication={j}>",
    "<([i, j, k], [i, j, k])->([i, j, k]) {i=4, j=80, k=256} permutation={j}>",
    "<([i, j, k], [i, j, k])->([i, j, k]) {i=4, j=92, k=256} need_replication={j}>",
    "<([i, j, k], [i, j, k])->([i, j, k], [i, j, k]) {i=4, j=32, k=8} need_replication={i}>",
    "<([i, j, k], [i, j, k], [], [])->([i, j, k], [i, j, k]) {i=16, j=48, k=3} permutation={i, j}>",
    "<([i, j, k], [i, j, k], [], [])->([j], [j]) {i=2, j=64, k=13} reduction={i, k}>",
    "<([i, j, k], [i, j, k], [i, j, k])->([i, j, k]) {i=4, j=3, k=256} need_replication={j}>",
    "<([i, j, k], [i, j, k], [i, j, k])->([i, j, k]) {i=4, j=96, k=256} need_replication={j}>",
    "<([i, j, k], [i, j, k], [i, j, k])->([i, j, k]) {i=4, j=96, k=256} permutation={j}>",
    "<([i, j, k], [i, l])->([i, j, k]) {i=8, j=12, k=16, l=5} need_replication={j, k, l}>",
    "<([i, j, l, n])->([i, k, m, o]) {i=5, j=2, k=3, l=5, m=5, n=3, o=2}>",
    "<([i, j, l])->([i, k, l]) {i=2, j=1, k=64, l=13}>",
    "<([i, j, l])->([j, k, l, m]) {i=1, j=8, k=1, l=4, m=1}>",
    "<([i, j, l], [i, j, k])->([i, l, k]) {i=8, j=3, k=5, l=3} need_replication={j, k, l}>",
    "<([i, j, l], [i, k, m], [], [], [])->([i, j, l]) {i=32, j=4, k=1, l=8, m=2} "
    "need_replication={k, m}>",
    "<([i, j, l], [i, k, m], [], [], [])->([i, j, l]) {i=32, j=4, k=1, l=8, m=2}>",
    "<([i, j, l], [i, l, k])->([i, j, k]) {i=4, j=8, k=16, l=32} reduction={l}>",
    "<([i, j])->([]) {i=1, j=1}>",
    "<([i, j])->([i, j, k]) {i=4, j=2, k=2} need_replication={k}>",
    "<([i, j])->([i, j]) {i=128, j=128}>",
    "<([i, j])->([i, j]) {i=4, j=8}>",
    "<([i, j])->([i, j]) {i=8, j=2}>",
    "<([i, j])->([i, j]) {i=8, j=4}>",
    "<([i, j])->([i, j], [i, j]) {i=16, j=8} need_replication={j} blocked_propagation={j}>",
    "<([i, j])->([ij, k]) {i=8, j=4, k=1}>",
    "<([i, j])->([ij]) {i=2, j=4}>",
    "<([i, j])->([j, i]) {i=4, j=2}, custom>",
    "<([i, j], [])->([i, j]) {i=8, j=16} permutation={i, j}>",
    "<([i, j], [i, j])->([i, j]) {i=8, j=2}>",
    "<([i, j], [i, j])->([i, k], [i, k]) {i=2, j=2, k=4} need_replication={j, k}>",
    "<([i, j], [i, j], [], [])->([i, k], [i, k]) {i=16, j=4, k=2} need_replication={k} "
    "blocked_propagation={k}>",
    "<([i, j], [i, j], [i, j])->([i, j]) {i=10, j=64} permutation={i}>",
    "<([i, j], [i, j], [i, j])->([i, j]) {i=12, j=64} need_replication={i}>",
    "<([i, j], [i, j], [i, j])->([i, j]) {i=4, j=8}>",
    "<([i, j], [j])->([i]) {i=8, j=32} reduction={j}>",
    "<([i, jk, lm, n], [j, l, n, o])->([i, k, m, o]) {i=2, j=112, k=2, l=112, m=2, n=192, o=64} "
    "reduction={j, l, n} permutation={k, m}>",
    "<([i, jk, lm, n], [k, m, n, o])->([i, j, l, o]) {i=2, j=112, k=2, l=112, m=2, n=192, o=64} "
    "reduction={k, m, n} permutation={j, l}>",
    "<([i, jk, lm, n], [k, m, o, np])->([i, j, l, np]) {i=8, j=112, k=2, l=112, m=2, n=16, o=1, "
    "p=16} reduction={k, m, o} permutation={j, l}>",
    "<([i, jk, lm, no], [k, m, o, n])->([i, j, l, n]) {i=8, j=112, k=2, l=112, m=2, n=16, o=12} "
    "reduction={k, m, o} permutation={j, l}>",
    "<([i, jk, lm, no], [k, m, o, np])->([i, j, l, np]) {i=8, j=112, k=2, l=112, m=2, n=16, o=12, "
    "p=16} reduction={k, m, o} permutation={j, l}>",
    "<([i, jkl])->([i, j, k, l]) {i=4, j=2, k=3, l=2}>",
    "<([i, k, j, l, n])->([i, j, k, m, n, o]) {i=2, j=5, k=3, l=1, m=11, n=7, o=13}>",
    "<([i, k, l])->([i, j, k, l]) {i=2, j=64, k=13, l=0}>",
    "<([i, k, l])->([i, j, k, l]) {i=2, j=64, k=13, l=1}>",
    "<([i, k, l], [i, j, k])->([i, j, l]) {i=8, j=5, k=3, l=3} need_replication={j, k, l}>",
    "<([i, k, mn])->([j, lm, n]) {i=2, j=3, k=3, l=2, m=2, n=4}>",
    "<([i, k], [k, j])->([i, j]) {i=8, j=16, k=32} reduction={k}>",
    "<([i, kl, mn, o], [l, n, o, ip])->([j, k, m, ip]) {i=4, j=1, k=112, l=2, m=112, n=2, o=192, "
    "p=64} reduction={l, n, o} permutation={k, m}>",
    "<([i, l, j, k])->([i, m, j, k]) {i=2, j=1, k=13, l=64, m=32} need_replication={l, m}>",
    "<([i, l, j], [i, j, k])->([i, l, k]) {i=8, j=3, k=5, l=3} need_replication={j, k, l}>",
    "<([i, l, k], [i, j, k])->([i, j, l]) {i=8, j=5, k=3, l=3} need_replication={j, k, l}>",
    "<([i, l])->([j, k]) {i=3, j=2, k=3, l=2}>",
    "<([i, lm, n])->([j, k, mn]) {i=3, j=2, k=3, l=2, m=2, n=4}>",
    "<([i])->([i]) {i=8}, custom>",
    "<([i])->([i], [i]) {i=16} need_replication={i} blocked_propagation={i}>",
    "<([i])->([i], [j, k]) {i=2, j=4, k=1000} need_replication={i} blocked_propagation={i}>",
    "<([i], [i])->([]) {i=32} reduction={i}>",
    "<([i], [i])->([i]) {i=2} need_replication={i} blocked_propagation={i}>",
    "<([ij, k, l])->([i, jk, l]) {i=2, j=4, k=4, l=5}>",
    "<([ij, k])->([i, j]) {i=8, j=4, k=1}>",
    "<([ij, kl, mn, o], [l, n, o, ip])->([j, k, m, ip]) {i=4, j=2, k=112, l=2, m=112, n=2, o=192, "
    "p=64} reduction={l, n, o} permutation={k, m}>",
    "<([ij, l, n, o])->([ik, mn, o]) {i=2, j=2, k=7, l=7, m=2, n=5, o=8}>",
    "<([ij, mn])->([ik, ln]) {i=2, j=3, k=2, l=3, m=2, n=2}>",
    "<([ij])->([i, j]) {i=2, j=4}>",
    "<([ik])->([i, j, k]) {i=8, j=1, k=4}>",
    "<([j, i], [j, i])->([k, i], [k, i]) {i=4, j=2, k=2} need_replication={j, k}>",
    "<([j, l, n, o], [i, k, m, o], [])->([j, l, n, o]) {i=9, j=10, k=12, l=24, m=12, n=24, o=64} "
    "need_replication={i, k, m} permutation={j, l, n}>",
    "<([j, m, i, l], [i, j, k, n])->([i, j, k, l]) {i=7, j=5, k=3, l=4, m=3, n=2} reduction={m} "
    "need_replication={l, n} blocked_propagation={l}>",
    "<([j, m, i, l], [i, n, j, k])->([i, j, k, l]) {i=7, j=5, k=3, l=4, m=3, n=2} reduction={m} "
    "need_replication={l, n} blocked_propagation={l}>",
    "<([j, n, i, l], [i, j, k, o], [i, j, k, m])->([j, n, i, l]) {i=7, j=5, k=3, l=4, m=2, n=3, "
    "o=2} reduction={k} need_replication={l, m, o}>",
    "<([j], [j, i])->([i]) {i=16, j=32} reduction={j}>",
    "<([k, i], [k, i])->([l, j], [l, j]) {i=4, j=2, k=2, l=4} need_replication={i, j, k, l}>",
    "<([k, j, l, i])->([i, j, k, l]) {i=100, j=32, k=256, l=64}>",
    "<([k, m, n], [i, j, o], [i, j, l, m])->([k, m, n]) {i=2, j=3, k=4, l=2, m=2, n=3, o=2} "
    "reduction={i, j} need_replication={k, l, o}>",
    "<([m, n, l], [i, j, k])->([i, j, k, l]) {i=2, j=3, k=2, l=2, m=3, n=1} reduction={m} "
    "need_replication={n}>",
    "<([n, k, m], [i, j, o], [i, j, l, m])->([n, k, m]) {i=2, j=3, k=4, l=2, m=2, n=3, o=2} "
    "reduction={i, j} need_replication={k, l, o}>",
    "<([n, k, m], [i, j], [i, j, l, m])->([n, k, m]) {i=2, j=3, k=4, l=2, m=2, n=3} reduction={i, "
    "j} need_replication={k, l}>",
    "<([n, k, m], [n, k, m], [i, j, o], [i, j, l, m], [i, j, l, m])->([n, k, m], [n, k, m]) {i=2, "
    "j=3, k=4, l=2, m=2, n=3, o=2} need_replication={i, j, k, l, o}>",
    "<([n, k, m], [n, k, m], [i, j, o], [i, j, l, m], [i, j, l, m])->([n, k, m], [n, k, m]) {i=2, "
    "j=3, k=4, l=2, m=2, n=3, o=2} reduction={i, j} need_replication={k, l, o}>",
    "<([o, k, l, m], [i, j, p])->([i, j, k, l, n]) {i=2, j=3, k=4, l=2, m=5, n=1, o=3, p=3} "
    "reduction={m, o} need_replication={k, n, p} blocked_propagation={k}>",
};

/* ---- helpers -------------------------------------------------------------- */

typedef enum kind { K_MESH, K_SHARDING, K_RULE } kind;

static cm_status parse_any(kind k, const char *t, size_t len, cm_arena *a, void **out,
                           size_t *consumed, cm_error *err)
{
    switch (k) {
    case K_MESH:
        return sp_mesh_parse(t, len, a, (sp_mesh **)out, consumed, err);
    case K_SHARDING:
        return sp_sharding_parse(t, len, a, (sp_sharding **)out, consumed, err);
    case K_RULE:
        return sp_rule_parse(t, len, a, (sp_rule **)out, consumed, err);
    }
    return CM_EINTERNAL;
}

static void print_any(kind k, const void *o, cm_buf *b)
{
    switch (k) {
    case K_MESH:
        sp_mesh_print(o, b);
        break;
    case K_SHARDING:
        sp_sharding_print(o, b);
        break;
    case K_RULE:
        sp_rule_print(o, b);
        break;
    }
}

/* Parses t and checks that printing gives `want` (t itself when NULL). */
static void check_print(kind k, const char *t, const char *want)
{
    cm_arena a;
    cm_arena_init(&a, 1024);
    cm_error err;
    cm_error_clear(&err);
    void *o = NULL;
    size_t consumed = 0;
    cm_status st = parse_any(k, t, strlen(t), &a, &o, &consumed, &err);
    if (st != CM_OK) {
        fail_msg("parse of %s failed: %s: %s", t, err.path, err.msg);
    }
    assert_int_equal(consumed, strlen(t));
    cm_buf b;
    cm_buf_init(&b);
    print_any(k, o, &b);
    assert_false(b.oom);
    assert_string_equal(b.data, want != NULL ? want : t);
    /* print -> parse -> print is stable */
    void *o2 = NULL;
    assert_int_equal(parse_any(k, b.data, b.len, &a, &o2, &consumed, &err), CM_OK);
    if (k == K_SHARDING) {
        assert_true(sp_sharding_equal(o, o2));
    }
    cm_buf b2;
    cm_buf_init(&b2);
    print_any(k, o2, &b2);
    assert_string_equal(b.data, b2.data);
    cm_buf_fini(&b2);
    cm_buf_fini(&b);
    cm_arena_fini(&a);
}

/* Parses t expecting CM_EINVAL with err->path == path and msg containing
 * what. */
static void check_parse_err(kind k, const char *t, const char *path, const char *what)
{
    cm_arena a;
    cm_arena_init(&a, 1024);
    cm_error err;
    cm_error_clear(&err);
    void *o = NULL;
    cm_status st = parse_any(k, t, strlen(t), &a, &o, NULL, &err);
    if (st != CM_EINVAL) {
        fail_msg("parse of %s: want CM_EINVAL, got %d", t, (int)st);
    }
    cm_arena_fini(&a);
    assert_int_equal(err.code, CM_EINVAL);
    if (strcmp(err.path, path) != 0 || (what != NULL && strstr(err.msg, what) == NULL)) {
        fail_msg("parse of %s: want %s (%s), got %s: %s", t, path, what ? what : "", err.path,
                 err.msg);
    }
}

static sp_mesh *mesh_of(cm_arena *a, const char *t)
{
    sp_mesh *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mesh_parse(t, strlen(t), a, &m, NULL, &err), CM_OK);
    return m;
}

static sp_sharding *sharding_of(cm_arena *a, const char *t)
{
    sp_sharding *s = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sharding_parse(t, strlen(t), a, &s, NULL, &err), CM_OK);
    return s;
}

/* Verifies sharding text s on mesh text m; want CM_OK or an error at path. */
static void check_verify(const char *m, const char *s, uint32_t rank, const int64_t *dims,
                         cm_status want, const char *path, const char *what)
{
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_mesh *mesh = m != NULL ? mesh_of(&a, m) : NULL;
    sp_sharding *sh = sharding_of(&a, s);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_sharding_verify(sh, mesh, rank, dims, &err);
    if (st != want) {
        fail_msg("verify %s on %s: want %d, got %d (%s)", s, m ? m : "(inlined)", (int)want,
                 (int)st, err.msg);
    }
    assert_int_equal(err.code, want);
    if (want != CM_OK) {
        assert_string_equal(err.path, path);
        if (what != NULL && strstr(err.msg, what) == NULL) {
            fail_msg("message \"%s\" lacks \"%s\"", err.msg, what);
        }
    }
    cm_arena_fini(&a);
}

static void check_mesh_verify(const char *m, cm_status want, const char *path, const char *what)
{
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_mesh *mesh = mesh_of(&a, m);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_mesh_verify(mesh, &err);
    if (st != want) {
        fail_msg("mesh verify %s: want %d, got %d (%s)", m, (int)want, (int)st, err.msg);
    }
    if (want != CM_OK) {
        assert_int_equal(err.code, want);
        assert_string_equal(err.path, path);
        if (what != NULL && strstr(err.msg, what) == NULL) {
            fail_msg("message \"%s\" lacks \"%s\"", err.msg, what);
        }
    }
    cm_arena_fini(&a);
}

/* An einsum call with up to 4 operands and 4 results given as shape lists. */
typedef struct shape {
    uint32_t rank;
    int64_t d[8];
} shape;

static cm_status einsum(const char *spec, const sp_einsum_opts *opts, const shape *ops,
                        uint32_t n_ops, const shape *res, uint32_t n_res, cm_buf *b, cm_error *err)
{
    const int64_t *od[4];
    uint32_t orank[4];
    const int64_t *rd[4];
    uint32_t rrank[4];
    for (uint32_t i = 0; i < n_ops; i++) {
        od[i] = ops[i].d;
        orank[i] = ops[i].rank;
    }
    for (uint32_t i = 0; i < n_res; i++) {
        rd[i] = res[i].d;
        rrank[i] = res[i].rank;
    }
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_rule *r = NULL;
    cm_error_clear(err);
    cm_status st = sp_rule_from_einsum(spec, opts, od, orank, n_ops, rd, rrank, n_res, &a, &r, err);
    if (st == CM_OK && b != NULL) {
        sp_rule_print(r, b);
    }
    cm_arena_fini(&a);
    return st;
}

static void check_einsum(const char *spec, const sp_einsum_opts *opts, const shape *ops,
                         uint32_t n_ops, const shape *res, uint32_t n_res, const char *want)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_status st = einsum(spec, opts, ops, n_ops, res, n_res, &b, &err);
    if (st != CM_OK) {
        fail_msg("einsum %s: %s: %s", spec, err.path, err.msg);
    }
    assert_string_equal(b.data, want);
    cm_buf_fini(&b);
}

static void check_einsum_err(const char *spec, const sp_einsum_opts *opts, const shape *ops,
                             uint32_t n_ops, const shape *res, uint32_t n_res, const char *path,
                             const char *what)
{
    cm_error err;
    cm_status st = einsum(spec, opts, ops, n_ops, res, n_res, NULL, &err);
    if (st != CM_EINVAL) {
        fail_msg("einsum %s: want CM_EINVAL, got %d", spec, (int)st);
    }
    assert_int_equal(err.code, CM_EINVAL);
    if (strcmp(err.path, path) != 0 || (what != NULL && strstr(err.msg, what) == NULL)) {
        fail_msg("einsum %s: want %s (%s), got %s: %s", spec, path, what ? what : "", err.path,
                 err.msg);
    }
}

/* ---- round trips ----------------------------------------------------------- */

static void test_sp_sharding_parse_roundtrips_shardy_corpus(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_OF(corpus_sh); i++) {
        if (strstr(corpus_sh[i], "\"a\",\"b\"") != NULL) {
            continue; /* hand-written input, not printer output */
        }
        check_print(K_SHARDING, corpus_sh[i], NULL);
    }
}

static void test_sp_mesh_parse_roundtrips_shardy_corpus(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_OF(corpus_me); i++) {
        check_print(K_MESH, corpus_me[i], NULL);
    }
}

static void test_sp_rule_parse_roundtrips_shardy_corpus(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_OF(corpus_ru); i++) {
        check_print(K_RULE, corpus_ru[i], NULL);
    }
}

static void test_sp_sharding_parse_accepts_whitespace_everywhere(void **state)
{
    (void)state;
    check_print(K_SHARDING,
                " <\n @mesh ,\n [ { \"a\" , ? } p2 ,{\"b\" : ( 2 ) 2 }, { ? } ] ,\n"
                " replicated = { \"c\" } , unreduced = { \"d\" } >",
                "<@mesh, [{\"a\", ?}p2, {\"b\":(2)2}, {?}], replicated={\"c\"}, "
                "unreduced={\"d\"}>");
    check_print(K_SHARDING, "<@mesh_a_2_b_2_c_2, [{\"a\",\"b\",?}, {?}]>",
                "<@mesh_a_2_b_2_c_2, [{\"a\", \"b\", ?}, {?}]>");
    check_print(K_MESH, "< [ \"a\" = 2 ,\"b\"=4 ] , device_ids = [ 3,2 , 1,0,4,5,6,7 ] >",
                "<[\"a\"=2, \"b\"=4], device_ids=[3, 2, 1, 0, 4, 5, 6, 7]>");
    check_print(K_RULE,
                "< ( [ i , j ] , [ j , k ] ) -> ( [ i , k ] ) { i = 8 , j = 8 , k = 16 }\n"
                " reduction = { j } , custom >",
                "<([i, j], [j, k])->([i, k]) {i=8, j=8, k=16} reduction={j}, custom>");
}

static void test_sp_sharding_print_priorities_and_lists(void **state)
{
    (void)state;
    check_print(K_SHARDING, "<@mesh, [{\"a\"}p1, {\"b\", ?}p0, {?}p3, {}]>", NULL);
    check_print(K_SHARDING, "<@mesh, [{\"x\"}, {?}], replicated={\"y\"}>", NULL);
    check_print(K_SHARDING,
                "<@mesh_xyz, [{\"x\"}, {\"y\":(2)2}], replicated={\"y\":(1)2}, "
                "unreduced={\"z\"}>",
                NULL);
    check_print(K_SHARDING, "<@mesh, [], unreduced={\"a\", \"b\"}>", NULL);
    /* as in Shardy, an axis list names at least one axis (see parse_errs) */
}

static void test_sp_sharding_unreduced_reduction_kinds(void **state)
{
    (void)state;
    /* Shardy prints the default kind (sum) as nothing, max/min before '{' */
    check_print(K_SHARDING, "<@m, [{\"a\"}, {}], unreduced=max{\"b\"}>", NULL);
    check_print(K_SHARDING, "<@m, [{}], unreduced=min{\"a\", \"b\"}>", NULL);
    check_print(K_SHARDING, "<@m, [{}], unreduced=sum{\"a\"}>", "<@m, [{}], unreduced={\"a\"}>");
    check_print(K_SHARDING, "<@m, [{}], unreduced = max { \"a\" } >",
                "<@m, [{}], unreduced=max{\"a\"}>");
    check_print(K_SHARDING, "<@m, [{}], unreduced{\"a\"}>", "<@m, [{}], unreduced={\"a\"}>");
    /* replicated may follow unreduced; it prints first */
    check_print(K_SHARDING, "<@m, [{}], unreduced=max{\"b\"}, replicated={\"a\"}>",
                "<@m, [{}], replicated={\"a\"}, unreduced=max{\"b\"}>");
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_sharding *sum = sharding_of(&a, "<@m, [{}], unreduced={\"a\"}>");
    sp_sharding *max = sharding_of(&a, "<@m, [{}], unreduced=max{\"a\"}>");
    sp_sharding *min = sharding_of(&a, "<@m, [{}], unreduced=min{\"a\"}>");
    assert_int_equal(sum->reduction, SP_REDUCTION_SUM);
    assert_int_equal(max->reduction, SP_REDUCTION_MAX);
    assert_int_equal(min->reduction, SP_REDUCTION_MIN);
    assert_false(sp_sharding_equal(sum, max));
    assert_false(sp_sharding_equal(max, min));
    assert_true(sp_sharding_equal(sum, sharding_of(&a, "<@m, [{}], unreduced=sum{\"a\"}>")));

    sp_sharding *c = sp_sharding_clone(&a, max);
    assert_non_null(c);
    assert_int_equal(c->reduction, SP_REDUCTION_MAX);
    assert_true(sp_sharding_equal(c, max));
    cm_arena_fini(&a);
}

static void test_sp_sharding_parse_inlined_mesh(void **state)
{
    (void)state;
    check_print(K_SHARDING,
                "<mesh<[\"a\"=2, \"b\"=4], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>, "
                "[{\"a\"}, {}]>",
                NULL);
    check_print(K_SHARDING, "<mesh<[], device_ids=[3]>, []>", NULL);
    check_print(K_SHARDING, "<mesh<[]>, [{?}]>", NULL);
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_sharding *s = sharding_of(&a, "<mesh<[\"a\"=2]>, [{\"a\"}]>");
    assert_null(s->mesh_name);
    assert_non_null(s->mesh);
    assert_int_equal(s->mesh->n_axes, 1);
    assert_string_equal(s->mesh->axes[0].name, "a");
    cm_arena_fini(&a);
}

static void test_sp_sharding_parse_escaped_names(void **state)
{
    (void)state;
    check_print(K_SHARDING, "<@\"my mesh\", [{\"a\\22b\"}, {\"c\\\\d\"}]>", NULL);
    check_print(K_SHARDING, "<@\"m\", [{\"\\n\\t\"}]>", "<@m, [{\"\\0A\\09\"}]>");
    check_print(K_MESH, "<[\"\\E2\\82\\AC\"=2]>", NULL);
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_sharding *s = sharding_of(&a, "<@\"my mesh\", [{\"a\\22b\"}]>");
    assert_string_equal(s->mesh_name, "my mesh");
    assert_string_equal(s->dims[0].axes[0].name, "a\"b");
    cm_arena_fini(&a);
}

static void test_sp_sharding_parse_fields(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    const char *t = "<@mesh, [{\"a\", \"b\":(2)4, ?}p3, {}], replicated={\"c\"}> : tensor<8xf32>";
    sp_sharding *s = NULL;
    size_t consumed = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sharding_parse(t, strlen(t), &a, &s, &consumed, &err), CM_OK);
    assert_int_equal(consumed, strlen(t) - strlen(" : tensor<8xf32>"));
    assert_string_equal(s->mesh_name, "mesh");
    assert_null(s->mesh);
    assert_int_equal(s->rank, 2);
    assert_int_equal(s->dims[0].n_axes, 2);
    assert_false(s->dims[0].is_closed);
    assert_int_equal(s->dims[0].priority, 3);
    assert_int_equal(s->dims[0].axes[0].pre_size, 0);
    assert_int_equal(s->dims[0].axes[1].pre_size, 2);
    assert_int_equal(s->dims[0].axes[1].size, 4);
    assert_true(s->dims[1].is_closed);
    assert_int_equal(s->dims[1].priority, -1);
    assert_int_equal(s->n_replicated, 1);
    assert_int_equal(s->n_unreduced, 0);
    cm_arena_fini(&a);
}

static void test_sp_mesh_parse_fields(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_mesh *m = mesh_of(&a, "<[\"a\"=2, \"b\"=3], device_ids=[0, 2, 4, 1, 3, 5]>");
    assert_int_equal(m->n_axes, 2);
    assert_int_equal(m->axes[1].size, 3);
    assert_int_equal(m->n_device_ids, 6);
    assert_int_equal(m->device_ids[2], 4);
    assert_int_equal(sp_mesh_size(m), 6);
    assert_int_equal(sp_mesh_axis_index(m, "b"), 1);
    assert_int_equal(sp_mesh_axis_index(m, "c"), -1);
    m = mesh_of(&a, "<[]>");
    assert_int_equal(m->n_axes, 0);
    assert_null(m->device_ids);
    assert_int_equal(sp_mesh_size(m), 1);
    cm_arena_fini(&a);
}

static void test_sp_mesh_size_overflow_returns_minus_one(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_mesh *m = mesh_of(&a, "<[\"a\"=4294967296, \"b\"=4294967296]>");
    assert_int_equal(sp_mesh_size(m), -1);
    m = mesh_of(&a, "<[\"a\"=0]>");
    assert_int_equal(sp_mesh_size(m), -1);
    cm_arena_fini(&a);
}

static void test_sp_rule_print_factor_names_after_z(void **state)
{
    (void)state;
    /* 20 factors: i..z then z_1, z_2 */
    check_print(K_RULE,
                "<([i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z, z_1, z_2])->"
                "([z_2z_1, ij]) {i=2, j=2, k=1, l=1, m=1, n=1, o=1, p=1, q=1, r=1, s=1, t=1, "
                "u=1, v=1, w=1, x=1, y=1, z=1, z_1=3, z_2=5} permutation={z_2}>",
                NULL);
    cm_arena a;
    cm_arena_init(&a, 1024);
    const char *t = "<([z_1, i])->([iz_1]) {i=2, j=1, k=1, l=1, m=1, n=1, o=1, p=1, q=1, r=1, "
                    "s=1, t=1, u=1, v=1, w=1, x=1, y=1, z=1, z_1=3}>";
    sp_rule *r = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_rule_parse(t, strlen(t), &a, &r, NULL, &err), CM_OK);
    assert_int_equal(r->n_factors, 19);
    assert_int_equal(r->operands[0].dims[0].factors[0], 18);
    assert_int_equal(r->results[0].dims[0].n_factors, 2);
    assert_int_equal(r->results[0].dims[0].factors[1], 18);
    assert_int_equal(r->factor_sizes[18], 3);
    cm_arena_fini(&a);
}

static void test_sp_rule_parse_fields(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    const char *t = "<([i, j, k])->([i, j, k]) {i=8, j=8, k=8} need_replication={j, k} "
                    "blocked_propagation={i, k}, custom>";
    sp_rule *r = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_rule_parse(t, strlen(t), &a, &r, NULL, &err), CM_OK);
    assert_int_equal(r->n_factors, 3);
    assert_int_equal(r->factor_kind[0], SP_FACTOR_PASS_THROUGH);
    assert_int_equal(r->factor_kind[1], SP_FACTOR_NEED_REPLICATION);
    assert_int_equal(r->factor_kind[2], SP_FACTOR_NEED_REPLICATION);
    assert_int_equal(r->factor_blocked[0], 1);
    assert_int_equal(r->factor_blocked[1], 0);
    assert_true(r->is_custom);
    assert_int_equal(r->n_operands, 1);
    assert_int_equal(r->operands[0].rank, 3);
    cm_arena_fini(&a);
    check_print(K_RULE, "<([], [])->([])>", NULL);
    check_print(K_RULE, "<([i, *])->([i]) {i=4}>", NULL);
    check_print(K_RULE,
                "<([i, j], [i, j])->([i, j]) {i=4, j=2} reduction={i} "
                "need_replication={j}>",
                NULL);
    /* special lists come in Shardy's order (any other is an error, see
     * parse_errs); braces are optional */
    check_print(K_RULE,
                "<([i, j, k])->([i]) {i=2, j=2, k=2} reduction=j permutation={k} "
                "blocked_propagation={i}>",
                "<([i, j, k])->([i]) {i=2, j=2, k=2} reduction={j} permutation={k} "
                "blocked_propagation={i}>");
}

/* ---- parse errors ------------------------------------------------------------ */

/* Malformed texts and what their errors say: the column the error points at
 * and words its message must contain. */
static const struct {
    kind k;
    const char *text, *col, *what;
} parse_errs[] = {
    {K_SHARDING, "", "col 1", "expected '<'"},
    {K_SHARDING, "@mesh, []>", "col 1", "expected '<'"},
    {K_SHARDING, "<mesh_a, []>", "col 2", "expecting MeshAttr or FlatSymbolRefAttr"},
    {K_SHARDING, "<@, []>", "col 3", "mesh name"},
    {K_SHARDING, "<@m [{}]>", "col 5", "expected ','"},
    {K_SHARDING, "<@m, {}>", "col 6", "'['"},
    {K_SHARDING, "<@m, [{\"a}]>", "col 8", "not terminated"},
    {K_SHARDING, "<@m, [{\"a\n\"}]>", "col 8", "end of the line"},
    {K_SHARDING, "<@m, [{\"a\",}]>", "col 12", "expected string"},
    {K_SHARDING, "<@m, [{\"a\" ?}]>", "col 12", "expected ','"},
    {K_SHARDING, "<@m, [{?, \"a\"}]>", "col 9", "expected '}'"},
    {K_SHARDING, "<@m, [{a}]>", "col 8", "expected string"},
    {K_SHARDING, "<@m, [{\"a\":(0)2}]>", "col 12", "pre-size must be at least 1: \"a\":(0)2"},
    {K_SHARDING, "<@m, [{\"a\":(1 2}]>", "col 15", "')'"},
    {K_SHARDING, "<@m, [{\"a\":(1)}]>", "col 15", "sub-axis size"},
    {K_SHARDING, "<@m, [{\"a\":(99999999999999999999)2}]>", "col 13", "out of range"},
    {K_SHARDING, "<@m, [{\"a\"}p99999999999]>", "col 12", "too large"},
    {K_SHARDING, "<@m, [{\"a\\00\"}]>", "col 10", "NUL"},
    {K_SHARDING, "<@m, [{\"a\\q\"}]>", "col 10", "escape"},
    {K_SHARDING, "<@m, [{}] x", "col 11", "expected '>'"},
    {K_SHARDING, "<@m, [{}}]>", "col 9", "expected ']'"},
    {K_SHARDING, "<@m, [{}], foo={}>", "col 12", "expected valid named axis list after comma"},
    {K_SHARDING, "<@m, [{}], replicated={}>", "col 24", "expected string"},
    {K_SHARDING, "<@m, [{}], replicated={\"a\"}, replicated={\"b\"}>", "col 30",
     "expected valid named axis list after comma"},
    {K_SHARDING, "<@m, [{}], unreduced={\"a\"}, replicated={\"b\"}, replicated={\"c\"}>", "col 47",
     "expected valid named axis list after comma"},
    {K_SHARDING, "<@m, [{}], unreduced=max[\"a\"]>", "col 25", "'{'"},
    {K_SHARDING, "<@m, [{}], unreduced=prod{\"a\"}>", "col 22", "'{'"},
    {K_SHARDING, "<@m, [{}], unreduced={\"a\"}, unreduced={\"b\"}>", "col 29",
     "expected valid named axis list after comma"},
    {K_SHARDING, "<@m, [{}], replicated {}>", "col 23", "'='"},
    {K_SHARDING, "<mesh<[\"a\"=2]> [{}]>", "col 16", "','"},
    {K_SHARDING, "<mesh[\"a\"=2], [{}]>", "col 6", "'<'"},
    {K_MESH, "[\"a\"=2]>", "col 1", "'<'"},
    {K_MESH, "<\"a\"=2>", "col 2", "'['"},
    {K_MESH, "<[\"a\"=2]", "col 9", "'>'"},
    {K_MESH, "<[\"a\" 2]>", "col 7", "'='"},
    {K_MESH, "<[\"a\"=x]>", "col 7", "integer axis size"},
    {K_MESH, "<[a=2]>", "col 3", "quoted axis name"},
    {K_MESH, "<[\"a\"=2 \"b\"=2]>", "col 9", "',' or ']'"},
    {K_MESH, "<[\"a\"=2], ids=[0]>", "col 11", "'device_ids'"},
    {K_MESH, "<[\"a\"=2], device_ids=[]>", "col 23", "device id"},
    {K_MESH, "<[\"a\"=2], device_ids=[1 0]>", "col 25", "',' or ']'"},
    {K_MESH, "<[\"a\"=9223372036854775808]>", "col 7", "out of range"},
    {K_RULE, "([i])->([i]) {i=2}>", "col 1", "'<'"},
    {K_RULE, "<([i]) ([i]) {i=2}>", "col 8", "'->'"},
    {K_RULE, "<([a])->([a]) {a=2}>", "col 4", "expecting symbol from 'i' to 'z'. Received: 'a'"},
    {K_RULE, "<([i, ])->([i]) {i=2}>", "col 7", "factor symbols or '*'"},
    {K_RULE, "<([i] [j])->([i]) {i=2}>", "col 7", "expected ')'"},
    {K_RULE, "<([i, j])->([i]) {i=2}>", "col 7", "factor j has no size"},
    {K_RULE, "<([i])->([i])>", "col 4", "missing"},
    {K_RULE, "<([i, i])->([i]) {i=2}>", "col 7", "used twice"},
    {K_RULE, "<([ii])->([i]) {i=2}>", "col 5", "used twice"},
    {K_RULE, "<([i])->([i]) {j=2}>", "col 16", "Expecting factor index symbol 'i', received: 'j'"},
    {K_RULE, "<([i])->([i]) {i=2, i=3}>", "col 21", "expecting factor indices to be ordered"},
    {K_RULE, "<([i])->([i]) {ij=2}>", "col 16", "single factor symbol"},
    {K_RULE, "<([i])->([i]) {i=-2}>", "col 18", "non-negative"},
    {K_RULE, "<([i])->([i]) {i=2} reduction={j}>", "col 32", "no size"},
    {K_RULE, "<([i])->([i]) {i=2} reduction={i} permutation={i}>", "col 48",
     "more than one factor type"},
    {K_RULE, "<([i])->([i]) {i=2} blocked_propagation={i, i}>", "col 45", "listed twice"},
    {K_RULE, "<([i])->([i]) {i=2} reduction={i} reduction={i}>", "col 35", "expected '>'"},
    {K_RULE, "<([i])->([i]) {i=2} foo={i}>", "col 21", "expected '>'"},
    {K_RULE, "<([i])->([i]) {i=2}, custom, custom>", "col 28", "'>'"},
    {K_RULE, "<([i])->([i]) {i=2}, bespoke>", "col 22", "'custom'"},
    {K_RULE, "<([z_0])->([i]) {i=2}>", "col 4", "without leading zeros"},
    {K_RULE, "<([z_99999999])->([i]) {i=2}>", "col 4", "factor z_99999999 has no size"},
    {K_RULE, "<([i])->([i]) {i=2} reduction={i}", "col 34", "'>'"},
};

/* Every row of parse_errs of kind k fails as it says. */
static void check_parse_errs(kind k)
{
    for (size_t i = 0; i < N_OF(parse_errs); i++) {
        if (parse_errs[i].k == k) {
            check_parse_err(k, parse_errs[i].text, parse_errs[i].col, parse_errs[i].what);
        }
    }
}

static void test_sp_sharding_parse_rejects_malformed(void **state)
{
    (void)state;
    check_parse_errs(K_SHARDING);
}

static void test_sp_sharding_parse_rejects_too_many_dims(void **state)
{
    (void)state;
    char t[512];
    size_t n = 0;
    n += (size_t)snprintf(t + n, sizeof t - n, "<@m, [");
    for (int i = 0; i < 65; i++) {
        n += (size_t)snprintf(t + n, sizeof t - n, "%s{}", i > 0 ? ", " : "");
    }
    snprintf(t + n, sizeof t - n, "]>");
    /* the 65th dim starts at offset 6 + 64 * 4 */
    check_parse_err(K_SHARDING, t, "col 263", "at most 64 dimensions");
    t[n - 4] = '\0';
    strcat(t, "]>"); /* 64 dims are fine */
    cm_arena a;
    cm_arena_init(&a, 1024);
    assert_int_equal(sharding_of(&a, t)->rank, 64);
    cm_arena_fini(&a);
}

static void test_sp_sharding_parse_rejects_too_many_axes(void **state)
{
    (void)state;
    size_t cap = 1100 * 6 + 64;
    char *t = malloc(cap);
    assert_non_null(t);
    size_t n = (size_t)snprintf(t, cap, "<@m, [{");
    for (int i = 0; i < 1025; i++) {
        n += (size_t)snprintf(t + n, cap - n, "%s\"a\"", i > 0 ? "," : "");
    }
    snprintf(t + n, cap - n, "}]>");
    /* axis 1025 starts at 7 + 1024 * 4 */
    check_parse_err(K_SHARDING, t, "col 4104", "at most 1024 axes");
    free(t);
}

static void test_sp_mesh_parse_rejects_malformed(void **state)
{
    (void)state;
    check_parse_errs(K_MESH);
}

static void test_sp_rule_parse_rejects_malformed(void **state)
{
    (void)state;
    check_parse_errs(K_RULE);
}

/* Every prefix and many one-byte corruptions of valid text either parse or
 * fail cleanly with a "col N" inside the text. */
static void fuzz_one(kind k, const char *t)
{
    size_t len = strlen(t);
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    static const char subst[] = "<>[]{}(),?=:\"@-pz_19 \\\x01";
    for (size_t cut = 0; cut <= len; cut++) {
        for (size_t v = 0; v <= sizeof subst - 1; v++) {
            memcpy(buf, t, len + 1);
            size_t n = len;
            if (v == sizeof subst - 1) {
                n = cut; /* prefix */
            } else if (cut < len) {
                buf[cut] = subst[v];
            } else {
                continue;
            }
            cm_arena a;
            cm_arena_init(&a, 1024);
            cm_error err;
            cm_error_clear(&err);
            void *o = NULL;
            size_t consumed = 0;
            cm_status st = parse_any(k, buf, n, &a, &o, &consumed, &err);
            if (st == CM_OK) {
                assert_true(consumed <= n);
                cm_buf b;
                cm_buf_init(&b);
                print_any(k, o, &b);
                cm_buf_fini(&b);
            } else {
                assert_int_equal(st, CM_EINVAL);
                unsigned long col = 0;
                assert_int_equal(sscanf(err.path, "col %lu", &col), 1);
                assert_true(col >= 1 && col <= n + 1);
            }
            cm_arena_fini(&a);
        }
    }
    free(buf);
}

static void test_sp_parsers_survive_corrupted_input(void **state)
{
    (void)state;
    fuzz_one(K_SHARDING, "<@mesh, [{\"a\", \"b\":(2)2, ?}p1, {}], replicated={\"c\"}, "
                         "unreduced={\"d\"}>");
    fuzz_one(K_SHARDING, "<mesh<[\"a\"=2], device_ids=[1, 0]>, [{\"a\"}]>");
    fuzz_one(K_MESH, "<[\"a\"=2, \"b\"=4], device_ids=[3, 2, 1, 0, 4, 5, 6, 7]>");
    fuzz_one(K_RULE, "<([ij, k], [k, z_1])->([ij, *]) {i=2, j=4, k=8} reduction={k} "
                     "need_replication={i} permutation={j} blocked_propagation={i}, custom>");
    for (size_t i = 0; i < N_OF(corpus_ru); i += 17) {
        fuzz_one(K_RULE, corpus_ru[i]);
    }
}

static void test_sp_rule_from_einsum_survives_corrupted_specs(void **state)
{
    (void)state;
    const char *spec = "... (a b) k, k 1 -> ... a b, (a b)";
    const char *names[] = {"a"};
    const int64_t sizes[] = {2};
    sp_einsum_opts o = {0};
    o.size_names = names;
    o.sizes = sizes;
    o.n_sizes = 1;
    shape ops[2] = {{3, {4, 8, 16}}, {2, {16, 1}}};
    shape res[2] = {{3, {4, 2, 4}}, {1, {8}}};
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    assert_int_equal(einsum(spec, &o, ops, 2, res, 2, &b, &err), CM_OK);
    assert_string_equal(b.data, "<([i, jk, l], [l, m])->([i, j, k], [jk]) {i=4, j=2, k=4, l=16, "
                                "m=1}>");
    cm_buf_fini(&b);
    static const char subst[] = "(). ,->1ai_";
    size_t len = strlen(spec);
    char buf[64];
    for (size_t cut = 0; cut < len; cut++) {
        for (size_t v = 0; v <= sizeof subst - 1; v++) {
            memcpy(buf, spec, len + 1);
            if (v == sizeof subst - 1) {
                buf[cut] = '\0';
            } else {
                buf[cut] = subst[v];
            }
            cm_status st = einsum(buf, &o, ops, 2, res, 2, NULL, &err);
            if (st != CM_OK) {
                assert_int_equal(st, CM_EINVAL);
                assert_true(strncmp(err.path, "col ", 4) == 0 || err.path[0] == '/');
            }
        }
    }
}

/* ---- mesh verify ----------------------------------------------------------------- */

static void test_sp_mesh_verify_accepts_valid(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_OF(corpus_me); i++) {
        check_mesh_verify(corpus_me[i], CM_OK, NULL, NULL);
    }
    check_mesh_verify("<[\"a\"=3, \"b\"=2], device_ids=[0, 2, 4, 1, 3, 5]>", CM_OK, NULL, NULL);
    check_mesh_verify("<[], device_ids=[3]>", CM_OK, NULL, NULL);
    check_mesh_verify("<[\"a\"=1]>", CM_OK, NULL, NULL);
}

static void test_sp_mesh_verify_rejects_bad_meshes(void **state)
{
    (void)state;
    check_mesh_verify("<[\"a\"=2, \"a\"=2]>", CM_EINVAL, "/axes/1", "duplicate axis name");
    check_mesh_verify("<[\"a\"=2, \"b\"=0]>", CM_EINVAL, "/axes/1", "positive");
    check_mesh_verify("<[\"a\"=-2]>", CM_EINVAL, "/axes/0", "positive");
    check_mesh_verify("<[\"a\"=4294967296, \"b\"=4294967296]>", CM_EINVAL, "/axes/1", "overflows");
    check_mesh_verify("<[\"a\"=2, \"b\"=2], device_ids=[0, 1, 2]>", CM_EINVAL, "/device_ids",
                      "number of device ids");
    check_mesh_verify("<[\"a\"=2, \"b\"=2], device_ids=[3, 1, 1, 0]>", CM_EINVAL, "/device_ids/2",
                      "repeats");
    check_mesh_verify("<[\"a\"=2, \"b\"=2], device_ids=[3, 1, 4, 0]>", CM_EINVAL, "/device_ids/2",
                      "out of range");
    check_mesh_verify("<[\"a\"=2, \"b\"=2], device_ids=[3, -1, 2, 0]>", CM_EINVAL, "/device_ids/1",
                      "out of range");
    /* iota device ids are the default order: the parser drops them, as
     * Shardy's mesh builder does */
    check_mesh_verify("<[\"a\"=2, \"b\"=2], device_ids=[0, 1, 2, 3]>", CM_OK, NULL, NULL);
    check_print(K_MESH, "<[\"a\"=2, \"b\"=2], device_ids=[0, 1, 2, 3]>", "<[\"a\"=2, \"b\"=2]>");
    check_print(K_MESH, "<[\"a\"=2], device_ids=[1, 0]>", NULL);
    check_print(K_MESH, "<[], device_ids=[0]>", NULL);
    check_mesh_verify("<[], device_ids=[0, 1]>", CM_EINVAL, "/device_ids", "at most one");
    check_mesh_verify("<[], device_ids=[-1]>", CM_EINVAL, "/device_ids/0", "non-negative");
}

/* ---- sharding verify ---------------------------------------------------------- */

static const char *const MESH_XYZ = "<[\"x\"=8, \"y\"=2, \"z\"=6]>";

static void test_sp_sharding_verify_accepts_valid(void **state)
{
    (void)state;
    const int64_t dims[3] = {16, 8, 0};
    check_verify(MESH_XYZ, "<@m, [{\"x\"}, {\"z\", \"y\", ?}p1, {}]>", 3, dims, CM_OK, NULL, NULL);
    check_verify(MESH_XYZ, "<@m, [{\"x\":(1)2}, {\"x\":(2)4}]>", 2, NULL, CM_OK, NULL, NULL);
    check_verify(MESH_XYZ,
                 "<@m, [{\"x\":(4)2, \"z\":(1)2}, {\"z\":(2)3}], replicated={\"x\":(1)2, \"y\"}, "
                 "unreduced={\"x\":(2)2}>",
                 2, NULL, CM_OK, NULL, NULL);
    check_verify(NULL, "<mesh<[\"a\"=2]>, [{\"a\"}]>", 1, NULL, CM_OK, NULL, NULL);
    check_verify("<[], device_ids=[0]>", "<@maximal_mesh, []>", 0, NULL, CM_OK, NULL, NULL);
    /* non-divisible dims are allowed */
    const int64_t odd[1] = {7};
    check_verify(MESH_XYZ, "<@m, [{\"x\"}]>", 1, odd, CM_OK, NULL, NULL);
}

static void test_sp_sharding_verify_fills_full_axis_sizes(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_mesh *m = mesh_of(&a, MESH_XYZ);
    sp_sharding *s =
        sharding_of(&a, "<@m, [{\"z\", \"x\":(1)2}], replicated={\"y\"}, unreduced={\"x\":(2)2}>");
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sharding_verify(s, m, 1, NULL, &err), CM_OK);
    assert_int_equal(s->dims[0].axes[0].size, 6);
    assert_int_equal(s->dims[0].axes[1].size, 2);
    assert_int_equal(s->replicated[0].size, 2);
    assert_int_equal(s->unreduced[0].size, 2);
    cm_arena_fini(&a);
}

static void test_sp_sharding_verify_rejects_bad_shardings(void **state)
{
    (void)state;
    const int64_t dims[2] = {8, 0};
    check_verify(MESH_XYZ, "<@m, [{\"w\"}, {}]>", 2, NULL, CM_EINVAL, "/dims/0/0",
                 "unknown axis name: \"w\"");
    check_verify(MESH_XYZ, "<@m, [{}], replicated={\"w\"}>", 1, NULL, CM_EINVAL, "/replicated/0",
                 "unknown axis");
    check_verify(MESH_XYZ, "<@m, [{}], unreduced={\"w\"}>", 1, NULL, CM_EINVAL, "/unreduced/0",
                 "unknown axis");
    check_verify(MESH_XYZ, "<@m, [{\"x\"}, {}]>", 3, NULL, CM_EINVAL, "/dims",
                 "doesn't match tensor rank: 2 != 3");
    check_verify(MESH_XYZ, "<@m, [{\"x\"}, {\"y\", \"x\"}]>", 2, NULL, CM_EINVAL, "/dims/1/1",
                 "duplicate axis ref: \"x\"");
    check_verify(MESH_XYZ, "<@m, [{\"x\", \"x\"}]>", 1, NULL, CM_EINVAL, "/dims/0/1", "duplicate");
    check_verify(MESH_XYZ, "<@m, [{\"x\"}], replicated={\"x\"}>", 1, NULL, CM_EINVAL,
                 "/replicated/0", "duplicate");
    check_verify(MESH_XYZ, "<@m, [{\"y\"}], unreduced={\"y\"}>", 1, NULL, CM_EINVAL, "/unreduced/0",
                 "duplicate");
    check_verify(MESH_XYZ, "<@m, [{\"x\"}, {\"x\":(2)2}]>", 2, NULL, CM_EINVAL, "/dims/1/0",
                 "overlaps \"x\"");
    check_verify(MESH_XYZ, "<@m, [{\"x\":(1)4}, {\"x\":(2)4}]>", 2, NULL, CM_EINVAL, "/dims/1/0",
                 "overlaps");
    check_verify(MESH_XYZ, "<@m, [{\"z\":(1)2}], replicated={\"z\":(1)3}>", 1, NULL, CM_EINVAL,
                 "/replicated/0", "overlaps");
    check_verify(MESH_XYZ, "<@m, [{\"x\":(1)1}]>", 1, NULL, CM_EINVAL, "/dims/0/0",
                 "greater than 1");
    check_verify(MESH_XYZ, "<@m, [{\"x\":(3)2}]>", 1, NULL, CM_EINVAL, "/dims/0/0", "must divide");
    check_verify(MESH_XYZ, "<@m, [{\"x\":(4)4}]>", 1, NULL, CM_EINVAL, "/dims/0/0", "must divide");
    check_verify(MESH_XYZ, "<@m, [{\"x\":(4611686018427387904)4}]>", 1, NULL, CM_EINVAL,
                 "/dims/0/0", "must divide");
    check_verify(MESH_XYZ, "<@m, [{\"x\":(1)8}]>", 1, NULL, CM_EINVAL, "/dims/0/0",
                 "full axis size");
    check_verify(MESH_XYZ, "<@m, [{\"x\":(1)2, \"x\":(2)2}]>", 1, NULL, CM_EINVAL, "/dims/0/1",
                 "merge");
    check_verify(MESH_XYZ, "<@m, [{}], replicated={\"x\":(1)2, \"x\":(2)2}>", 1, NULL, CM_EINVAL,
                 "/replicated/1", "merge");
    check_verify(MESH_XYZ, "<@m, [{}], replicated={\"y\", \"x\"}>", 1, NULL, CM_EINVAL,
                 "/replicated/1", "not ordered");
    check_verify(MESH_XYZ, "<@m, [{}], unreduced={\"x\":(4)2, \"x\":(1)2}>", 1, NULL, CM_EINVAL,
                 "/unreduced/1", "not ordered");
    check_verify(MESH_XYZ, "<@m, [{}p1]>", 1, NULL, CM_EINVAL, "/dims/0", "priority");
    /* Shardy accepts sharding a dimension of size 0 (its shards are empty) */
    check_verify(MESH_XYZ, "<@m, [{}, {\"x\"}]>", 2, dims, CM_OK, NULL, NULL);
    check_verify("<[], device_ids=[0]>", "<@maximal_mesh, [{\"a\"}]>", 1, NULL, CM_EINVAL,
                 "/dims/0/0", "unknown axis");
}

static void test_sp_sharding_verify_rejects_missing_mesh(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    sp_sharding *s = sharding_of(&a, "<@m, []>");
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sharding_verify(s, NULL, 0, NULL, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "");
    s->dims = NULL;
    s->rank = 0;
    s->dims = (sp_dim_sharding *)NULL;
    sp_dim_sharding d = {NULL, 0, true, -5};
    s->dims = &d;
    s->rank = 1;
    sp_mesh *m = mesh_of(&a, MESH_XYZ);
    cm_error_clear(&err);
    assert_int_equal(sp_sharding_verify(s, m, 1, NULL, &err), CM_EINVAL);
    assert_string_equal(err.path, "/dims/0");
    cm_arena_fini(&a);
}

/* ---- equal, open, clone ------------------------------------------------------------- */

static void test_sp_sharding_equal_compares_deeply(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    const char *base = "<@m, [{\"a\", \"b\":(2)2, ?}p1, {}], replicated={\"c\"}>";
    sp_sharding *s = sharding_of(&a, base);
    assert_true(sp_sharding_equal(s, sharding_of(&a, base)));
    const char *differ[] = {
        "<@n, [{\"a\", \"b\":(2)2, ?}p1, {}], replicated={\"c\"}>",
        "<@m, [{\"a\", \"b\":(2)2}p1, {}], replicated={\"c\"}>",
        "<@m, [{\"a\", \"b\":(2)2, ?}p2, {}], replicated={\"c\"}>",
        "<@m, [{\"a\", \"b\":(2)2, ?}, {}], replicated={\"c\"}>",
        "<@m, [{\"a\", \"b\":(1)2, ?}p1, {}], replicated={\"c\"}>",
        "<@m, [{\"a\", \"b\":(2)4, ?}p1, {}], replicated={\"c\"}>",
        "<@m, [{\"a\", \"b\", ?}p1, {}], replicated={\"c\"}>",
        "<@m, [{\"a\", ?}p1, {}], replicated={\"c\"}>",
        "<@m, [{\"a\", \"b\":(2)2, ?}p1, {?}], replicated={\"c\"}>",
        "<@m, [{\"a\", \"b\":(2)2, ?}p1, {}]>",
        "<@m, [{\"a\", \"b\":(2)2, ?}p1, {}], replicated={\"c\"}, unreduced={\"d\"}>",
        "<@m, [{\"a\", \"b\":(2)2, ?}p1], replicated={\"c\"}>",
        "<mesh<[\"a\"=2]>, [{\"a\", \"b\":(2)2, ?}p1, {}], replicated={\"c\"}>",
    };
    for (size_t i = 0; i < N_OF(differ); i++) {
        assert_false(sp_sharding_equal(s, sharding_of(&a, differ[i])));
        assert_false(sp_sharding_equal(sharding_of(&a, differ[i]), s));
    }
    assert_true(sp_sharding_equal(sharding_of(&a, "<mesh<[\"a\"=2]>, [{}]>"),
                                  sharding_of(&a, "<mesh<[\"a\"=2]>, [{}]>")));
    assert_false(sp_sharding_equal(sharding_of(&a, "<mesh<[\"a\"=2]>, [{}]>"),
                                   sharding_of(&a, "<mesh<[\"a\"=4]>, [{}]>")));
    assert_false(sp_sharding_equal(sharding_of(&a, "<mesh<[\"a\"=2], device_ids=[1, 0]>, []>"),
                                   sharding_of(&a, "<mesh<[\"a\"=2]>, []>")));
    assert_true(sp_sharding_equal(NULL, NULL));
    assert_false(sp_sharding_equal(s, NULL));
    /* a verified full axis (size filled) equals an unverified one */
    sp_sharding *v = sharding_of(&a, "<@m, [{\"a\"}]>");
    v->dims[0].axes[0].size = 4;
    assert_true(sp_sharding_equal(v, sharding_of(&a, "<@m, [{\"a\"}]>")));
    cm_arena_fini(&a);
}

static void test_sp_sharding_open_makes_open_dims(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    char name[8] = "mesh";
    sp_sharding *s = sp_sharding_open(&a, name, 3);
    assert_non_null(s);
    name[0] = 'X'; /* the sharding owns a copy */
    cm_buf b;
    cm_buf_init(&b);
    sp_sharding_print(s, &b);
    assert_string_equal(b.data, "<@mesh, [{?}, {?}, {?}]>");
    cm_buf_reset(&b);
    s = sp_sharding_open(&a, "m", 0);
    assert_non_null(s);
    sp_sharding_print(s, &b);
    assert_string_equal(b.data, "<@m, []>");
    cm_buf_fini(&b);
    cm_arena_fini(&a);
}

static void test_sp_sharding_clone_is_deep(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    cm_arena b;
    cm_arena_init(&b, 1024);
    const char *texts[] = {
        "<@mesh, [{\"a\", \"b\":(2)2, ?}p1, {}], replicated={\"c\"}, unreduced={\"d\"}>",
        "<mesh<[\"a\"=2, \"b\"=2], device_ids=[3, 2, 1, 0]>, [{\"a\"}, {?}]>",
        "<@m, []>",
    };
    for (size_t i = 0; i < N_OF(texts); i++) {
        sp_sharding *s = sharding_of(&a, texts[i]);
        sp_sharding *c = sp_sharding_clone(&b, s);
        assert_non_null(c);
        assert_true(sp_sharding_equal(s, c));
        cm_buf out;
        cm_buf_init(&out);
        sp_sharding_print(c, &out);
        assert_string_equal(out.data, texts[i]);
        cm_buf_fini(&out);
    }
    sp_sharding *s = sharding_of(&a, texts[0]);
    sp_sharding *c = sp_sharding_clone(&b, s);
    cm_arena_fini(&a); /* the clone must not point into a */
    cm_buf out;
    cm_buf_init(&out);
    sp_sharding_print(c, &out);
    assert_string_equal(out.data, texts[0]);
    cm_buf_fini(&out);
    cm_arena_fini(&b);
}

/* ---- einsum ------------------------------------------------------------------------ */

static void test_sp_rule_from_einsum_matmul(void **state)
{
    (void)state;
    const char *red[] = {"j"};
    sp_einsum_opts o = {0};
    o.reduction = red;
    o.n_reduction = 1;
    shape ops[2] = {{2, {8, 16}}, {2, {16, 32}}};
    shape res[1] = {{2, {8, 32}}};
    check_einsum("i j, j k -> i k", &o, ops, 2, res, 1,
                 "<([i, j], [j, k])->([i, k]) {i=8, j=16, k=32} reduction={j}>");
    /* names are arbitrary identifiers, numbered by first appearance */
    check_einsum("batch hidden_2,hidden_2 out->batch out", NULL, ops, 2, res, 1,
                 "<([i, j], [j, k])->([i, k]) {i=8, j=16, k=32}>");
    const char *nr[] = {"k"};
    const char *pm[] = {"i"};
    sp_einsum_opts o2 = {0};
    o2.need_replication = nr;
    o2.n_need_replication = 1;
    o2.permutation = pm;
    o2.n_permutation = 1;
    check_einsum("i j, j k -> i k", &o2, ops, 2, res, 1,
                 "<([i, j], [j, k])->([i, k]) {i=8, j=16, k=32} need_replication={k} "
                 "permutation={i}>");
}

static void test_sp_rule_from_einsum_ellipsis(void **state)
{
    (void)state;
    shape ops[2] = {{3, {4, 5, 6}}, {2, {5, 6}}};
    shape res[1] = {{2, {4, 5}}};
    check_einsum("... i, ... i -> ...", NULL, ops, 2, res, 1,
                 "<([i, j, k], [j, k])->([i, j]) {i=4, j=5, k=6}>");
    shape sc[1] = {{0, {0}}};
    shape one[1] = {{1, {3}}};
    shape two[2] = {{1, {3}}, {2, {2, 3}}};
    check_einsum("..., ...->...", NULL, two, 2, two + 1, 1, "<([i], [j, i])->([j, i]) {i=3, j=2}>");
    check_einsum("...->...", NULL, sc, 1, sc, 1, "<([])->([])>");
    check_einsum("...i->...i", NULL, one, 1, one, 1, "<([i])->([i]) {i=3}>");
}

static void test_sp_rule_from_einsum_compound_and_one(void **state)
{
    (void)state;
    const char *names[] = {"i"};
    const int64_t sizes[] = {2};
    sp_einsum_opts o = {0};
    o.size_names = names;
    o.sizes = sizes;
    o.n_sizes = 1;
    shape ops[1] = {{2, {8, 3}}};
    shape res[1] = {{3, {2, 4, 3}}};
    check_einsum("(i j) k -> i j k", &o, ops, 1, res, 1,
                 "<([ij, k])->([i, j, k]) {i=2, j=4, k=3}>");
    /* j is known from the result, nothing to infer */
    check_einsum("(i j) k -> i j k", NULL, ops, 1, res, 1,
                 "<([ij, k])->([i, j, k]) {i=2, j=4, k=3}>");
    shape ops1[1] = {{2, {1, 5}}};
    shape res1[1] = {{1, {5}}};
    check_einsum("1 i -> i", NULL, ops1, 1, res1, 1, "<([i, j])->([j]) {i=1, j=5}>");
    shape res2[1] = {{2, {5, 1}}};
    check_einsum("1 i -> i 1", NULL, ops1, 1, res2, 1, "<([i, j])->([j, k]) {i=1, j=5, k=1}>");
    /* several outputs, zero operands */
    shape r2[2] = {{1, {5}}, {1, {5}}};
    check_einsum("-> i, i", NULL, NULL, 0, r2, 2, "<()->([i], [i]) {i=5}>");
}

static void test_sp_rule_from_einsum_rejects_bad_specs(void **state)
{
    (void)state;
    shape ops[2] = {{2, {8, 16}}, {2, {16, 32}}};
    shape res[1] = {{2, {8, 32}}};
    check_einsum_err("i j, j k", NULL, ops, 2, res, 1, "col 9", "exactly one '->'");
    check_einsum_err("i j, j k -> i k -> i", NULL, ops, 2, res, 1, "col 17", "exactly one");
    check_einsum_err("i j, j k - i k", NULL, ops, 2, res, 1, "col 10", "'->'");
    check_einsum_err("i j, j k > i k", NULL, ops, 2, res, 1, "col 10", "'->'");
    check_einsum_err("i j -> i k", NULL, ops, 2, res, 1, "col 1", "has 1 operands");
    check_einsum_err("i j, j k -> i k, i", NULL, ops, 2, res, 1, "col 12", "has 2 results");
    check_einsum_err("i j, j k k -> i k", NULL, ops, 2, res, 1, "col 6", "rank 3");
    check_einsum_err("i j, j -> i k", NULL, ops, 2, res, 1, "col 6", "rank 1");
    check_einsum_err("i j, j i -> i k", NULL, ops, 2, res, 1, "col 8",
                     "factor i has sizes 8 and 32");
    check_einsum_err("i i, j k -> i k", NULL, ops, 2, res, 1, "col 3", "used twice in operand 0");
    shape sq[1] = {{2, {8, 8}}};
    check_einsum_err("i j, j k -> i i", NULL, ops, 2, sq, 1, "col 15", "used twice in result 0");
    check_einsum_err("i j, j k -> i 2", NULL, ops, 2, res, 1, "col 15", "only '1'");
    check_einsum_err("i j, j k -> i 1", NULL, ops, 2, res, 1, "col 15", "written as 1");
    check_einsum_err("i j, j k -> i k.", NULL, ops, 2, res, 1, "col 16", "'...'");
    check_einsum_err("i j, j ... -> i k", NULL, ops, 2, res, 1, "col 8", "may only start");
    check_einsum_err("i j, j k -> i $", NULL, ops, 2, res, 1, "col 15", "unexpected character");
    check_einsum_err("i j, j k) -> i k", NULL, ops, 2, res, 1, "col 9", "without '('");
    check_einsum_err("i j, (j k -> i k", NULL, ops, 2, res, 1, "col 6", "not closed");
    check_einsum_err("i j, (j (k)) -> i k", NULL, ops, 2, res, 1, "col 9", "nested");
    check_einsum_err("i j, (j) k -> i k", NULL, ops, 2, res, 1, "col 6", "at least two");
    check_einsum_err("i j, (j 1) -> i k", NULL, ops, 2, res, 1, "col 9", "factor name");
    check_einsum_err("i _j, j k -> i k", NULL, ops, 2, res, 1, "col 3", "unexpected character");

    shape cops[1] = {{2, {8, 3}}};
    shape cres[1] = {{2, {8, 3}}};
    check_einsum_err("(i j) k -> (i j) k", NULL, cops, 1, cres, 1, "col 2", "no determined size");
    const char *names[] = {"i", "j"};
    const int64_t sizes[] = {2, 3};
    sp_einsum_opts o = {0};
    o.size_names = names;
    o.sizes = sizes;
    o.n_sizes = 2;
    check_einsum_err("(i j) k -> (i j) k", &o, cops, 1, cres, 1, "col 1", "multiply to 6");
    const int64_t sizes3[] = {3, 3};
    o.sizes = sizes3;
    o.n_sizes = 1;
    check_einsum_err("(i j) k -> (i j) k", &o, cops, 1, cres, 1, "col 1", "cannot infer");
    const int64_t sizes1[] = {1, 8};
    o.sizes = sizes1;
    o.n_sizes = 2;
    check_einsum_err("(i j) k -> (i j) k", &o, cops, 1, cres, 1, "col 2", "size 1");

    shape bops[2] = {{3, {4, 5, 6}}, {3, {3, 5, 6}}};
    shape bres[1] = {{2, {4, 5}}};
    check_einsum_err("... i, ... i -> ...", NULL, bops, 2, bres, 1, "col 8", "batch dimension 0");
    shape sc[1] = {{1, {4}}};
    check_einsum_err("... i j -> ...", NULL, sc, 1, sc, 1, "col 1", "plus '...'");
}

static void test_sp_rule_from_einsum_rejects_bad_opts(void **state)
{
    (void)state;
    shape ops[2] = {{2, {8, 16}}, {2, {16, 32}}};
    shape res[1] = {{2, {8, 32}}};
    const char *unknown[] = {"q"};
    sp_einsum_opts o = {0};
    o.reduction = unknown;
    o.n_reduction = 1;
    check_einsum_err("i j, j k -> i k", &o, ops, 2, res, 1, "/reduction/0", "not in the rule");
    const char *j[] = {"j"};
    sp_einsum_opts o2 = {0};
    o2.reduction = j;
    o2.n_reduction = 1;
    o2.permutation = j;
    o2.n_permutation = 1;
    check_einsum_err("i j, j k -> i k", &o2, ops, 2, res, 1, "/permutation/0", "more than once");
    const char *names[] = {"q", "i"};
    const int64_t sizes[] = {2, 2};
    sp_einsum_opts o3 = {0};
    o3.size_names = names;
    o3.sizes = sizes;
    o3.n_sizes = 1;
    check_einsum_err("i j, j k -> i k", &o3, ops, 2, res, 1, "/size_names/0", "not used");
    o3.size_names = names + 1;
    check_einsum_err("i j, j k -> i k", &o3, ops, 2, res, 1, "col 1", "factor i has sizes 2 and 8");
    const char *dup[] = {"i", "i"};
    o3.size_names = dup;
    o3.n_sizes = 2;
    check_einsum_err("i j, j k -> i k", &o3, ops, 2, res, 1, "/size_names/1", "two sizes");
    const int64_t neg[] = {-1};
    o3.sizes = neg;
    o3.n_sizes = 1;
    check_einsum_err("i j, j k -> i k", &o3, ops, 2, res, 1, "/size_names/0", "negative");
}

static void test_sp_rule_from_einsum_rejects_bad_shapes(void **state)
{
    (void)state;
    shape ops[1] = {{2, {8, -1}}};
    shape res[1] = {{2, {8, 3}}};
    check_einsum_err("i j -> i j", NULL, ops, 1, res, 1, "col 1", "unknown size");
    shape big[1] = {{65, {0}}};
    check_einsum_err("i -> i", NULL, big, 1, res, 1, "col 1", "at most 64");
    char *spec = malloc(20000);
    assert_non_null(spec);
    memset(spec, ' ', 19999);
    memcpy(spec, "i->i", 4);
    spec[19999] = '\0';
    shape one[1] = {{1, {2}}};
    check_einsum_err(spec, NULL, one, 1, one, 1, "col 16385", "longer than");
    free(spec);
}

/* ---- OOM ----------------------------------------------------------------------------- */

/* Runs f with allocation n failing, n = 0, 1, ... until it succeeds; every
 * failure must be CM_ENOMEM (or a failed buffer), and ASan checks leaks. */
typedef cm_status (*oom_fn)(cm_arena *a, cm_error *err);

/* One attempt (tests/unit/tu_oom.h): f on a fresh arena. */
typedef struct shard_oom {
    oom_fn f;
    cm_arena a;
    cm_error err;
} shard_oom;

static void shard_oom_setup(void *ctx)
{
    shard_oom *t = ctx;
    cm_arena_init(&t->a, 1024);
    cm_error_clear(&t->err);
}

static cm_status shard_oom_run(void *ctx)
{
    shard_oom *t = ctx;
    return t->f(&t->a, &t->err);
}

static void shard_oom_done(void *ctx, cm_status st)
{
    shard_oom *t = ctx;
    cm_arena_fini(&t->a);
    if (st != CM_OK) {
        assert_int_equal(t->err.code, CM_ENOMEM);
    }
}

static void oom_loop(oom_fn f)
{
    shard_oom t = {.f = f};
    static const tu_oom loop = {shard_oom_setup, shard_oom_run, shard_oom_done};
    assert_true(tu_oom_loop(&loop, &t, 100000) > 0);
}

static const char *const OOM_SHARDING =
    "<mesh<[\"a\"=2, \"b\"=2, \"c\"=2, \"d\"=2, \"e\"=2], device_ids=[31, 30, 29, 28, 27, 26, "
    "25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, "
    "0]>, [{\"a\", \"b\", \"c\", \"d\", \"e\", ?}p1, {}, {}, {}, {}, {}, {}], "
    "replicated={\"c\", \"d\"}, unreduced={\"e\"}>";

static cm_status oom_sharding(cm_arena *a, cm_error *err)
{
    sp_sharding *s = NULL;
    cm_status st = sp_sharding_parse(OOM_SHARDING, strlen(OOM_SHARDING), a, &s, NULL, err);
    if (st != CM_OK) {
        return st;
    }
    sp_sharding *c = sp_sharding_clone(a, s);
    if (c == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "clone");
    }
    sp_sharding *o = sp_sharding_open(a, "mesh_with_a_long_name", 64);
    if (o == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "open");
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_sharding_print(c, &b);
    sp_mesh_print(c->mesh, &b);
    bool failed = b.oom;
    cm_buf_fini(&b);
    if (failed) {
        return cm_error_set(err, CM_ENOMEM, NULL, "print");
    }
    return sp_mesh_verify(c->mesh, err);
}

static cm_status oom_mesh(cm_arena *a, cm_error *err)
{
    const char *t = "<[\"a\"=2, \"b\"=2, \"c\"=2, \"d\"=2, \"e\"=2, \"f\"=2], device_ids=[63, 62, "
                    "61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, "
                    "42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, "
                    "23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, "
                    "2, 1, 0]>";
    sp_mesh *m = NULL;
    cm_status st = sp_mesh_parse(t, strlen(t), a, &m, NULL, err);
    return st != CM_OK ? st : sp_mesh_verify(m, err);
}

static cm_status oom_rule(cm_arena *a, cm_error *err)
{
    const char *t = "<([i, jk, lm, n], [k, m, o, np])->([i, j, l, np]) {i=8, j=112, k=2, l=112, "
                    "m=2, n=16, o=1, p=16} reduction={k, m, o} permutation={j, l}, custom>";
    sp_rule *r = NULL;
    cm_status st = sp_rule_parse(t, strlen(t), a, &r, NULL, err);
    if (st != CM_OK) {
        return st;
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_rule_print(r, &b);
    bool failed = b.oom || strcmp(b.data, t) != 0;
    cm_buf_fini(&b);
    return failed ? cm_error_set(err, CM_ENOMEM, NULL, "print") : CM_OK;
}

static cm_status oom_einsum(cm_arena *a, cm_error *err)
{
    const int64_t d0[] = {4, 8, 16};
    const int64_t d1[] = {16, 6};
    const int64_t r0[] = {4, 2, 4, 6};
    const int64_t *od[] = {d0, d1};
    const uint32_t orank[] = {3, 2};
    const int64_t *rd[] = {r0};
    const uint32_t rrank[] = {4};
    const char *names[] = {"a"};
    const int64_t sizes[] = {2};
    const char *red[] = {"k"};
    sp_einsum_opts o = {0};
    o.size_names = names;
    o.sizes = sizes;
    o.n_sizes = 1;
    o.reduction = red;
    o.n_reduction = 1;
    sp_rule *r = NULL;
    return sp_rule_from_einsum("... (a b) k, k n -> ... a b n", &o, od, orank, 2, rd, rrank, 1, a,
                               &r, err);
}

/* sp_sharding_parse, sp_mesh_parse, sp_rule_parse and sp_rule_from_einsum. */
/* The _ex parsers give MLIR's further errors as notes: innermost failure in
 * err, then one note per enclosing level, positions as "col N". */
static void test_sp_parse_ex_reports_mlir_error_chain(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    cm_error err;
    sp_parse_notes notes;
    sp_sharding *sh = NULL;
    const char *t = "<@foo, [{}, {}], replicated={\"a\", b}>";
    cm_error_clear(&err);
    notes.n = 0;
    notes.quiet = false;
    assert_int_equal(sp_sharding_parse_ex(t, strlen(t), &a, &sh, NULL, &notes, &err), CM_EINVAL);
    assert_string_equal(err.msg, "expected string");
    assert_string_equal(err.path, "col 35");
    assert_int_equal(notes.n, 3);
    assert_non_null(strstr(notes.items[0].msg, "Sdy_AxisRef parameter 'name'"));
    assert_non_null(strstr(notes.items[1].msg, "failed to parse axis list"));
    assert_non_null(strstr(notes.items[2].msg, "parameter 'replicated_axes'"));
    assert_int_equal(notes.items[0].line, 0);
    /* a priority with leading zeros, and a check Shardy's verifier makes: no
     * enclosing-level notes for the latter */
    t = "<@foo, [{\"a\"}p01]>";
    cm_error_clear(&err);
    notes.n = 0;
    assert_int_equal(sp_sharding_parse_ex(t, strlen(t), &a, &sh, NULL, &notes, &err), CM_EINVAL);
    assert_string_equal(err.msg, "priorities with leading zeros are not allowed, got: p01");
    assert_int_equal(notes.n, 1);
    t = "<@foo, [{\"a\":(0)2}]>";
    cm_error_clear(&err);
    notes.n = 0;
    assert_int_equal(sp_sharding_parse_ex(t, strlen(t), &a, &sh, NULL, &notes, &err), CM_EINVAL);
    assert_string_equal(err.msg, "sub-axis pre-size must be at least 1: \"a\":(0)2");
    assert_int_equal(notes.n, 0);
    assert_true(notes.quiet);
    cm_arena_fini(&a);
}

/* sp_rule_parse_ex keeps what Shardy's verifier checks for the verifier
 * (the special lists as written); sp_rule_parse rejects it at once. */
static void test_sp_rule_parse_ex_defers_checks(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    cm_error err;
    sp_rule *r = NULL;
    const char *t = "<([i, j, k])->([i, k]) {i=2, j=4, k=8} need_replication={k, i, z}>";
    cm_error_clear(&err);
    assert_int_equal(sp_rule_parse_ex(t, strlen(t), &a, &r, NULL, NULL, &err), CM_OK);
    assert_int_equal(r->n_factors, 3);
    assert_int_equal(r->n_listed[1], 3);
    assert_int_equal(r->listed[1][0], 2);
    assert_int_equal(r->listed[1][2], 17);
    assert_int_equal(r->factor_kind[0], SP_FACTOR_NEED_REPLICATION);
    cm_error_clear(&err);
    assert_int_equal(sp_rule_parse(t, strlen(t), &a, &r, NULL, &err), CM_EINVAL);
    /* factor sizes out of iota order, and an unfinished z_ symbol */
    t = "<([i, j])->([ij]) {j=4, i=2}>";
    cm_error_clear(&err);
    assert_int_equal(sp_rule_parse_ex(t, strlen(t), &a, &r, NULL, NULL, &err), CM_EINVAL);
    assert_non_null(strstr(err.msg, "Expecting factor index symbol 'i', received: 'j'"));
    sp_parse_notes notes;
    notes.n = 0;
    notes.quiet = false;
    t = "<([z_, j])->([i]) {z_=2, j=4}>";
    cm_error_clear(&err);
    assert_int_equal(sp_rule_parse_ex(t, strlen(t), &a, &r, NULL, &notes, &err), CM_EINVAL);
    assert_string_equal(err.msg, "expecting integer after 'z_'. Received: 'z_'");
    assert_int_equal(notes.n, 2);
    assert_non_null(strstr(notes.items[1].msg, "parameter 'operand_mappings'"));
    /* an index past 2^63-1 does not stop the parse, but fails it */
    notes.n = 0;
    t = "<([z_9223372036854775808])->([z_1]) {i=2}>";
    cm_error_clear(&err);
    assert_int_equal(sp_rule_parse_ex(t, strlen(t), &a, &r, NULL, &notes, &err), CM_EINVAL);
    assert_non_null(strstr(err.msg, "expecting symbol index <=2^63-1"));
    assert_int_equal(notes.n, 0);
    cm_arena_fini(&a);
}

static void test_sp_parsers_survive_oom(void **state)
{
    (void)state;
    static const oom_fn parsers[] = {oom_sharding, oom_mesh, oom_rule, oom_einsum};
    for (size_t i = 0; i < N_OF(parsers); i++) {
        oom_loop(parsers[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_sharding_parse_roundtrips_shardy_corpus),
        cmocka_unit_test(test_sp_mesh_parse_roundtrips_shardy_corpus),
        cmocka_unit_test(test_sp_rule_parse_roundtrips_shardy_corpus),
        cmocka_unit_test(test_sp_sharding_parse_accepts_whitespace_everywhere),
        cmocka_unit_test(test_sp_sharding_print_priorities_and_lists),
        cmocka_unit_test(test_sp_sharding_unreduced_reduction_kinds),
        cmocka_unit_test(test_sp_sharding_parse_inlined_mesh),
        cmocka_unit_test(test_sp_sharding_parse_escaped_names),
        cmocka_unit_test(test_sp_sharding_parse_fields),
        cmocka_unit_test(test_sp_mesh_parse_fields),
        cmocka_unit_test(test_sp_mesh_size_overflow_returns_minus_one),
        cmocka_unit_test(test_sp_rule_print_factor_names_after_z),
        cmocka_unit_test(test_sp_rule_parse_fields),
        cmocka_unit_test(test_sp_sharding_parse_rejects_malformed),
        cmocka_unit_test(test_sp_sharding_parse_rejects_too_many_dims),
        cmocka_unit_test(test_sp_sharding_parse_rejects_too_many_axes),
        cmocka_unit_test(test_sp_mesh_parse_rejects_malformed),
        cmocka_unit_test(test_sp_rule_parse_rejects_malformed),
        cmocka_unit_test(test_sp_parsers_survive_corrupted_input),
        cmocka_unit_test(test_sp_rule_from_einsum_survives_corrupted_specs),
        cmocka_unit_test(test_sp_mesh_verify_accepts_valid),
        cmocka_unit_test(test_sp_mesh_verify_rejects_bad_meshes),
        cmocka_unit_test(test_sp_sharding_verify_accepts_valid),
        cmocka_unit_test(test_sp_sharding_verify_fills_full_axis_sizes),
        cmocka_unit_test(test_sp_sharding_verify_rejects_bad_shardings),
        cmocka_unit_test(test_sp_sharding_verify_rejects_missing_mesh),
        cmocka_unit_test(test_sp_sharding_equal_compares_deeply),
        cmocka_unit_test(test_sp_sharding_open_makes_open_dims),
        cmocka_unit_test(test_sp_sharding_clone_is_deep),
        cmocka_unit_test(test_sp_rule_from_einsum_matmul),
        cmocka_unit_test(test_sp_rule_from_einsum_ellipsis),
        cmocka_unit_test(test_sp_rule_from_einsum_compound_and_one),
        cmocka_unit_test(test_sp_rule_from_einsum_rejects_bad_specs),
        cmocka_unit_test(test_sp_rule_from_einsum_rejects_bad_opts),
        cmocka_unit_test(test_sp_rule_from_einsum_rejects_bad_shapes),
        cmocka_unit_test(test_sp_parse_ex_reports_mlir_error_chain),
        cmocka_unit_test(test_sp_rule_parse_ex_defers_checks),
        cmocka_unit_test(test_sp_parsers_survive_oom),
    };
    return cmocka_run_group_tests_name("sp_shard", tests, NULL, NULL);
}
