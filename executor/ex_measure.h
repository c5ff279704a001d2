/* SPDX-License-Identifier: Apache-2.0
 * executor: measures a module on this machine for the plan advisor
 * (`shardplan suggest --check`, planner/advise/sp_suggest.h sp_suggest_bench_fn):
 * the module is propagated, partitioned and run on the local devices, and
 * checked against a single-device run (ex_check_text).
 * Thread contract: as ex_check_text (one call at a time per module text). */
#ifndef EX_MEASURE_H
#define EX_MEASURE_H

#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_suggest.h"

/* Runs len bytes of MLIR text iters times (seed 1, devices: the mesh size)
 * and fills out: the median wall time of one partitioned run, the devices
 * used and whether the numerics match the reference run. Errors: those of
 * ex_check_text (CM_EINVAL "op X cannot be executed yet", ...), CM_ENOMEM. */
cm_status ex_measure_text(const char *mlir, size_t len, uint32_t iters, sp_suggest_measure *out,
                          cm_error *err);

#endif /* EX_MEASURE_H */
