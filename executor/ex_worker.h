/* SPDX-License-Identifier: Apache-2.0
 * executor: the benchmark worker, `shardplan exec-worker` (a hidden
 * subcommand the server runs as a child process per benchmark run, see
 * docs/executor.md "The benchmark service"). It reads a graph document or
 * MLIR module from stdin (cm_file_read "-"), runs it like `shardplan run` and writes a line
 * protocol to stdout: "progress F" lines (0..1), then exactly one of
 * "result {JSON}" or "error MESSAGE". Thread contract: call from main only. */
#ifndef EX_WORKER_H
#define EX_WORKER_H

#include <stdio.h>

/* `shardplan exec-worker [--devices N] [--warmup W] [--iters K] [--seed S]
 * [--affinity|--no-affinity] [--fault crash|hang|oom]`: argv[0] is
 * "exec-worker". --affinity pins the device workers, --no-affinity never
 * does, the default pins them when they outnumber the CPUs
 * (ex_exec_opts.affinity). The result JSON holds devices, warmup, iters,
 * seed, affinity (whether the workers ran pinned), iter_s (wall seconds of each measured run),
 * step_s (their median), flops (per run, cost model), flop_per_s,
 * predicted_step_s (cost model, built-in cpu-local profile), reference_s and
 * numerics {match, max_abs_diff[, mismatch]}. --fault exists for the tests of
 * the server's supervision; the server passes it only when started with test
 * faults enabled. Returns 0 when a result was written (also on a numerics
 * mismatch, which the result records), 1 after an error line, 2 on bad usage. */
int ex_worker_main(int argc, char **argv, FILE *out, FILE *errs);

#endif /* EX_WORKER_H */
