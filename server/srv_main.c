/* SPDX-License-Identifier: Apache-2.0
 * The shardplan binary: dispatches subcommands to their modules.
 * The one mutable global of the server lives here (STYLE.md): the stop flag
 * that SIGTERM/SIGINT set and `serve` polls to shut down gracefully. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sp_compare.h"
#include "sp_cost.h"
#include "sp_example.h"
#include "sp_opt.h"
#include "sp_plan_json.h"
#include "srv_app.h"
#include "srv_client.h"

/* Set by SIGTERM/SIGINT; srv_serve_main drains and exits when it is set. */
static volatile sig_atomic_t stop_flag = 0;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

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
          "                                    plans side by side and where they diverge\n"
          "  serve [--listen HOST:PORT] [--db PATH] [--config FILE] [--insecure] ...\n"
          "                                    the HTTP plan server (serve --help)\n"
          "  token create --scope read|write|admin [--label L] | list | revoke ID [--db PATH]\n"
          "                                    API tokens (stored hashed)\n"
          "  client --server URL [--token T] submit|plan|get|compare|bench|... \n"
          "                                    talk to a server (client --help)\n",
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
    if (strcmp(argv[1], "serve") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        return srv_serve_main(argc - 1, argv + 1, &stop_flag);
    }
    if (strcmp(argv[1], "token") == 0) {
        return srv_token_main(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "client") == 0) {
        signal(SIGPIPE, SIG_IGN);
        return srv_client_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "shardplan: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
