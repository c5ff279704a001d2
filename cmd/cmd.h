/* SPDX-License-Identifier: Apache-2.0
 * cmd: the `shardplan` subcommands, argv in and text out. Each takes argv
 * with argv[0] the subcommand's name, writes its result to out and its
 * errors to errs, and returns a process exit status (0 ok, 1 failed, 2
 * usage). They call the libraries' typed functions; no library calls them,
 * and nothing below cmd/ parses argv. Thread contract: not reentrant with
 * respect to stdio. */
#ifndef CMD_H
#define CMD_H

#include <stdio.h>

/* `shardplan opt`: a driver that mirrors Shardy's sdy_opt (cmd_opt.c). */
int cmd_opt(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan run FILE.mlir|GRAPH.json [--devices N] [--iters K] [--seed S]
 * [--affinity|--no-affinity] [--ops N]`: prints per-iteration times, GFLOP/s
 * and "numerics: match" or the first mismatch (1 then) (cmd_run.c). */
int cmd_run(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan calibrate [--out FILE] [--devices N] [--rank]`: the measured
 * profile, checked with the profile reader, to FILE (default: out); with
 * --rank, 1 unless it ranks the benchmark suite as measured (cmd_calibrate.c). */
int cmd_calibrate(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan exec-worker [--devices N] [--warmup W] [--iters K] [--seed S]
 * [--affinity|--no-affinity] [--fault crash|hang|oom]`, hidden: one benchmark
 * run for server/srv_bench.c, its input on stdin and its line protocol on
 * out (cmd_worker.c). --affinity pins the device workers, --no-affinity
 * never does, the default pins them when they outnumber the CPUs
 * (ex_exec_opts.affinity). The result JSON holds devices, warmup, iters,
 * seed, affinity (whether the workers ran pinned), iter_s (wall seconds of
 * each measured run), step_s (their median), flops (per run, cost model),
 * flop_per_s, predicted_step_s (cost model, built-in cpu-local profile),
 * reference_s and numerics {match, max_abs_diff[, mismatch]}, then the
 * per-op "ops" and "collectives" when the timers fit. --fault exists for the
 * tests of the server's supervision; the server passes it only when started
 * with test faults enabled. Returns 0 when a result was written (also on a
 * numerics mismatch, which the result records), 1 after an error line, 2 on
 * bad usage. */
int cmd_worker(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan cost FILE [--profile NAME|FILE] [--overlap F] [--mode auto|explicit|implied]
 * [--format text|json]` (cmd_cost.c). */
int cmd_cost(int argc, char **argv, FILE *out, FILE *errs);

#endif /* CMD_H */
