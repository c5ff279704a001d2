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

#endif /* CMD_H */
