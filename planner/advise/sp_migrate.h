/* SPDX-License-Identifier: Apache-2.0
 * planner: the GSPMD -> Shardy migration report (issue 20,
 * docs/migration.md), shared by `shardplan migrate` (cmd/cmd_migrate.c)
 * and POST /v1/migrations (server/srv_h_migrate.c). For a module as GSPMD
 * left it (mhlo.sharding on its ops), the report gives GSPMD's and Shardy's
 * sharding of every value where they differ (first first, with Shardy's
 * recorded origins), both costs per device, and the constraints that make
 * Shardy reproduce GSPMD's choice, re-planned.
 * Ownership: the report is appended to the caller's buffer; nothing of the
 * caller's is kept. Thread contract: runs on different inputs may proceed
 * in parallel. */
#ifndef SP_MIGRATE_H
#define SP_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>

#include "cm.h"
#include "sp_cost.h"

/* Builds the migration report of the MLIR text (len bytes) and appends it
 * to out: as a "shardplan.migration/v1" JSON object when json (one line
 * per divergence, ending in a newline), else as the text `shardplan
 * migrate` prints. file names the input in the report and in errors (NULL:
 * "input"); profile prices both sides (NULL: the cost model's default).
 * Errors: the reader's and the GSPMD import's (CM_EINVAL with LINE:COL);
 * CM_EINVAL when the module has no GSPMD shardings; CM_ENOMEM. out is
 * unchanged on error. */
cm_status sp_migrate_report(const char *text, size_t len, const char *file,
                            const sp_profile *profile, bool json, cm_buf *out, cm_error *err);

#endif /* SP_MIGRATE_H */
