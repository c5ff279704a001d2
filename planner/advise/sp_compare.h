/* SPDX-License-Identifier: Apache-2.0
 * planner: `shardplan compare`, plans side by side. Each input (MLIR or graph
 * document) is planned with -sdy-propagation-pipeline (sharding origins
 * recorded) and costed; the report gives per-tensor sharding differences,
 * memory, communication per mesh axis, FLOPs and predicted step time, and the
 * first op in program order where the plans diverge with the origin of each
 * plan's sharding there. Thread contract: not reentrant with respect to stdio. */
#ifndef SP_COMPARE_H
#define SP_COMPARE_H

#include <stdio.h>

/* `shardplan compare A B [C D] [--profile NAME|FILE] [--overlap F]
 * [--format text|json]`: argv[0] is "compare". Returns an exit status. */
int sp_compare_main(int argc, char **argv, FILE *out, FILE *errs);

#endif /* SP_COMPARE_H */
