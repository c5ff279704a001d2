/* SPDX-License-Identifier: Apache-2.0
 * cmd: the shardplan binary. main looks the subcommand up in a static table
 * and hands it argv from the subcommand's name on. The server's stop flag
 * (STYLE.md's one mutable global) is in cmd_serve.c. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

/* The release, as info.version of server/openapi.json says it. */
#define SHARDPLAN_VERSION "1.0.0"

static void usage(FILE *f)
{
    fputs("usage: shardplan <command> [args]   (shardplan --version; shardplan COMMAND --help)\n"
          "commands:\n"
          "  opt FILE|- [passes and options]   run sdy passes on MLIR (sdy_opt compatible)\n"
          "  plan GRAPH.json|MODULE.mlir [--pass NAME] [--json|--mlir]\n"
          "                                    propagate shardings and write the plan\n"
          "  example mlp|transformer [--layers N --d-model D --heads H --seq S --batch B\n"
          "          --mesh data=2,model=4 --strategy dp|fsdp|tp|dp+tp] [--train]\n"
          "          [--json|--mlir]          write a ready graph\n"
          "  cost FILE [--profile NAME|FILE] [--overlap F] [--json]\n"
          "                                    per-device memory, FLOPs, communication, step time\n"
          "  run FILE.mlir|GRAPH.json [--devices N] [--iters K] [--seed S] [--json]\n"
          "                                    partition, execute on N local devices, check numerics\n"
          "  interpret FILE.mlir [--split-input-file]\n"
          "                                    the StableHLO interpreter (check.*, run_parallel)\n"
          "  calibrate [--out FILE] [--devices N] [--rank] [--json]\n"
          "                                    measure this machine, write a device profile; --rank:\n"
          "                                    check it ranks the benchmark suite as measured\n"
          "  compare A B [C D] [--profile NAME|FILE] [--json]\n"
          "                                    plans side by side and where they diverge\n"
          "  lint FILE [--mesh NAME] [--profile NAME|FILE] [--min-bytes N] [--json]\n"
          "                                    findings: silent replication, rematerialisation,\n"
          "                                    mixed I/O meshes, memory over capacity, with fixes\n"
          "  collectives FILE [--profile NAME|FILE] [--json]\n"
          "                                    every inserted collective: bytes, axes, time, cause\n"
          "  sweep [--devices N] [--layers N ...] [--json]\n"
          "                                    transformer over every data x model mesh and strategy\n"
          "  suggest FILE [--objective time|memory] [-k N] [--profile NAME|FILE] [--check] [--json]\n"
          "                                    sharding constraints that cut predicted time or memory\n"
          "  whatif FILE --edit JSON [--edit JSON...] [--edits FILE] [--profile P] [--json] [--mlir]\n"
          "                                    edit constraints, shardings, barriers, rules;\n"
          "                                    re-propagate incrementally and diff\n"
          "  migrate MODULE.mlir [--profile NAME|FILE]\n"
          "                                    GSPMD's shardings beside Shardy's: divergences,\n"
          "                                    costs, a checked constraint for the first\n"
          "  serve [--listen HOST:PORT] [--db PATH] [--config FILE] [--insecure] ...\n"
          "                                    the HTTP plan server (serve --help)\n"
          "  token create --scope read|write|admin [--label L] | list | revoke ID [--db PATH]\n"
          "                                    API tokens (stored hashed)\n"
          "  client --server URL [--token T] submit|plan|get|compare|bench|... \n"
          "                                    talk to a server (client --help)\n"
          "  backup PATH [--db DB] [--config FILE]\n"
          "                                    online copy of the database (safe while serving)\n",
          f);
}

static int client_main(int argc, char **argv, FILE *out, FILE *errs)
{
    signal(SIGPIPE, SIG_IGN);
    return cmd_client(argc, argv, out, errs);
}

typedef int (*command_fn)(int argc, char **argv, FILE *out, FILE *errs);

static const struct command {
    const char *name;
    command_fn fn;
} commands[] = {
    {"opt", cmd_opt},
    {"plan", cmd_plan},
    {"example", cmd_example},
    {"cost", cmd_cost},
    {"run", cmd_run},
    {"interpret", cmd_interpret},
    {"exec-worker", cmd_worker}, /* hidden: one benchmark run for srv_bench.c */
    {"calibrate", cmd_calibrate},
    {"compare", cmd_compare},
    {"lint", cmd_lint},
    {"collectives", cmd_collectives},
    {"sweep", cmd_sweep},
    {"suggest", cmd_suggest},
    {"whatif", cmd_whatif},
    {"migrate", cmd_migrate},
    {"serve", cmd_serve},
    {"token", cmd_token},
    {"backup", cmd_backup},
    {"client", client_main},
};

int main(int argc, char **argv)
{
    (void)cm_tune_malloc(); /* passes reuse freed pages: common/cm.h */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            return commands[i].fn(argc - 1, argv + 1, stdout, stderr);
        }
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        fputs("shardplan " SHARDPLAN_VERSION "\n", stdout);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "shardplan: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
