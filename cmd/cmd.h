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

#include "sp_input.h"

/* The input options shared by the subcommands that read a model: `--pass
 * NAME` (the propagation to plan with) and `--rules FILE` (a graph document
 * whose custom_rules apply, for MLIR inputs), as a stored plan keeps them
 * (cmd_input.c). */
typedef struct cmd_input {
    sp_input_opts io; /* for sp_input_read and the advisors */
    char *rules_text; /* heap: the rules file */
} cmd_input;

void cmd_input_init(cmd_input *ci);
void cmd_input_fini(cmd_input *ci);
/* Takes argv[*i] (and its value, advancing *i) when it is an input option:
 * 1 when taken, 0 when argv[*i] is not one, -1 after printing an error to
 * errs as "shardplan CMD: ...". */
int cmd_input_option(int argc, char **argv, int *i, cmd_input *ci, const char *cmd, FILE *errs);
/* A subcommand's body that takes the input options into ci. */
typedef int (*cmd_input_main)(int argc, char **argv, FILE *out, FILE *errs, cmd_input *ci);
/* Runs body with a fresh cmd_input, finalised after it, and returns its
 * exit status: the whole of a subcommand that reads a model. */
int cmd_input_run(int argc, char **argv, FILE *out, FILE *errs, cmd_input_main body);

/* `shardplan opt`: a driver that mirrors Shardy's sdy_opt (cmd_opt.c). */
int cmd_opt(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan run FILE.mlir|GRAPH.json [--devices N] [--iters K] [--seed S]
 * [--affinity|--no-affinity] [--ops N] [--json]`: prints per-iteration times,
 * GFLOP/s and "numerics: match" or the first mismatch (1 then), or with
 * --json one object with a benchmark result's fields (cmd_run.c). */
int cmd_run(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan interpret FILE|- [--split-input-file]`: the StableHLO
 * interpreter (stablehlo-translate --interpret): runs @main, or every
 * function without arguments, with the check dialect and
 * interpreter.run_parallel; 1 when a check fails (cmd_interpret.c). */
int cmd_interpret(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan calibrate [--out FILE] [--devices N] [--rank] [--json]`: the
 * measured profile, checked with the profile reader, to FILE (default: out);
 * with --out and --json, the measured figures as one JSON object on out;
 * with --rank, 1 unless it ranks the benchmark suite as measured
 * (cmd_calibrate.c). */
int cmd_calibrate(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan exec-worker [--devices N] [--warmup W] [--iters K] [--seed S]
 * [--pass NAME] [--rules-bytes N] [--affinity|--no-affinity]
 * [--fault crash|hang|oom]`, hidden: one benchmark run for
 * server/srv_bench.c, the plan's input on stdin (N bytes of its rules
 * document first, when it has one) planned with its pass, and the line
 * protocol on out (cmd_worker.c). --affinity pins the device workers, --no-affinity
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
/* `shardplan cost FILE [--pass NAME] [--rules FILE] [--partition] [--profile NAME|FILE]
 * [--overlap F] [--mode auto|explicit|implied] [--format text|json]` (cmd_cost.c). */
int cmd_cost(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan plan GRAPH.json|MODULE.mlir [--pass NAME] [--json|--mlir]` (cmd_plan.c). */
int cmd_plan(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan example mlp|transformer [--layers N --d-model D --heads H --seq S
 * --batch B --mesh data=2,model=4 --strategy dp|fsdp|tp|dp+tp] [--train]
 * [--format json|mlir]`: 2 and the usage on errs for bad options (cmd_example.c). */
int cmd_example(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan lint FILE [--mesh NAME] [--profile NAME|FILE] [--min-bytes N] [--json]`:
 * 1 also when a finding has severity error; `shardplan collectives FILE
 * [--profile NAME|FILE] [--json]` (cmd_lint.c). */
int cmd_lint(int argc, char **argv, FILE *out, FILE *errs);
int cmd_collectives(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan sweep [--devices N] [--layers N] [--d-model D] [--heads H] [--seq S]
 * [--batch B] [--inference] [--strategies dp,fsdp,tp,dp+tp] [--threads T] [--jobs N]
 * [--profile NAME|FILE] [--json]` (cmd_sweep.c). */
int cmd_sweep(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan suggest FILE [--objective time|memory] [-k N] [--profile NAME|FILE]
 * [--threads T] [--max-candidates N] [--max-edits N] [--check [--iters K]] [--json]`:
 * --check measures the input and the top suggestion with the executor and
 * prints measured against predicted step times (cmd_suggest.c). */
int cmd_suggest(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan compare A B [C D] [--profile NAME|FILE] [--overlap F] [--format text|json]`
 * (cmd_compare.c). */
int cmd_compare(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan whatif FILE --edit JSON [--edit JSON...] [--edits FILE] [--profile P]
 * [--full] [--json] [--mlir]`: --mlir prints the edited module instead of the
 * report (cmd_whatif.c). */
int cmd_whatif(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan migrate MODULE.mlir [--profile P]`: GSPMD's shardings beside
 * Shardy's from the same user annotations, the costs, and a checked
 * constraint for the first divergence (cmd_migrate.c, issue 20). */
int cmd_migrate(int argc, char **argv, FILE *out, FILE *errs);

/* `shardplan serve [--listen HOST:PORT] [--db PATH] [--config FILE] ...`
 * (cmd_serve.c): installs the SIGTERM/SIGINT handlers (and ignores
 * SIGPIPE), starts the server (server/srv_app.h) and runs until a signal
 * arrives, then shuts down gracefully. Progress goes to errs. */
int cmd_serve(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan token create --scope read|write|admin [--label L] [--db PATH]`,
 * `token import FILE --scope S`, `token list`, `token revoke ID`
 * (cmd_serve.c): a created token is printed to out, once. */
int cmd_token(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan backup PATH [--db DB] [--config FILE]` (cmd_serve.c): an
 * online copy of the database, safe while a server runs on it. */
int cmd_backup(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan client --server URL [--token T] [--table] COMMAND ...`
 * (cmd_client.c). Commands: submit, plan, get, list, put, delete, compare,
 * bench, health (see `client --help`). URL and token also come from
 * SHARDPLAN_SERVER and SHARDPLAN_TOKEN. Returns 0 on success, 1 when the
 * server answered an error or could not be reached, 2 for bad usage.
 * Thread contract: call from the main thread (it initializes libcurl
 * globally). */
int cmd_client(int argc, char **argv, FILE *out, FILE *errs);

#endif /* CMD_H */
