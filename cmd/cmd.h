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
/* `shardplan cost FILE [--profile NAME|FILE] [--overlap F] [--mode auto|explicit|implied]
 * [--format text|json]` (cmd_cost.c). */
int cmd_cost(int argc, char **argv, FILE *out, FILE *errs);
/* `shardplan plan GRAPH.json|MODULE.mlir [--pass NAME] [--format json|mlir]` (cmd_plan.c). */
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

#endif /* CMD_H */
