/* SPDX-License-Identifier: Apache-2.0
 * planner: `shardplan opt`, a driver that mirrors Shardy's sdy_opt: it reads
 * MLIR (optionally split at `// -----`), runs the passes named on the command
 * line with their options, checks `expected-*` diagnostics when asked, and
 * prints the result. Thread contract: not reentrant with respect to stdio. */
#ifndef SP_OPT_H
#define SP_OPT_H

#include <stdio.h>

/* Runs `opt` with argv[0] = "opt". Output to out, diagnostics to errs.
 * Returns a process exit status. */
int sp_opt_main(int argc, char **argv, FILE *out, FILE *errs);

#endif /* SP_OPT_H */
