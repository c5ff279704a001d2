/* SPDX-License-Identifier: Apache-2.0
 * planner: the advisor's modules under their old umbrella name. Each module
 * has its own header now (sp_lint.h: lint and the collective inventory,
 * sp_sweep.h, sp_suggest.h, sp_whatif.h, sp_compare.h); include those.
 * TODO(#15): remove once server/ and executor/ include the module headers. */
#ifndef SP_ADVISE_H
#define SP_ADVISE_H

#include "sp_lint.h"
#include "sp_suggest.h"
#include "sp_sweep.h"
#include "sp_whatif.h"

#endif /* SP_ADVISE_H */
