/* SPDX-License-Identifier: Apache-2.0
 * The shardplan binary: dispatches subcommands to their modules. */
#include <stdio.h>
#include <string.h>

#include "sp_compare.h"
#include "sp_cost.h"
#include "sp_example.h"
#include "sp_opt.h"
#include "sp_plan_json.h"

static void usage(FILE *f)
{
    fputs("usage: shardplan <command> [args]\n"
          "commands:\n"
          "  opt FILE|- [passes and options]   run sdy passes on MLIR (sdy_opt compatible)\n"
          "  plan GRAPH.json|MODULE.mlir [--pass NAME] [--format json|mlir]\n"
          "                                    propagate shardings and write the plan\n"
          "  example mlp|transformer [--layers N --d-model D --heads H --seq S --batch B\n"
          "          --mesh data=2,model=4 --strategy dp|fsdp|tp|dp+tp] [--train]\n"
          "          [--format json|mlir]     write a ready graph\n"
          "  cost FILE [--profile NAME|FILE] [--overlap F] [--format text|json]\n"
          "                                    per-device memory, FLOPs, communication, step time\n"
          "  compare A B [C D] [--profile NAME|FILE] [--format text|json]\n"
          "                                    plans side by side and where they diverge\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "opt") == 0) {
        return sp_opt_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (strcmp(argv[1], "plan") == 0) {
        return sp_plan_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (strcmp(argv[1], "example") == 0) {
        return sp_example_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (strcmp(argv[1], "cost") == 0) {
        return sp_cost_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (strcmp(argv[1], "compare") == 0) {
        return sp_compare_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "shardplan: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
