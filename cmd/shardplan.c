/* SPDX-License-Identifier: Apache-2.0
 * cmd: the shardplan binary. main looks the subcommand up in a static table
 * and hands it argv from the subcommand's name on.
 * The one mutable global of the server lives here (STYLE.md): the stop flag
 * that SIGTERM/SIGINT set and `serve` polls to shut down gracefully. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ex_calib.h"
#include "ex_exec.h"
#include "ex_worker.h"
#include "cmd.h"
#include "srv_app.h"
#include "srv_client.h"
#include "st_db.h"

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
          "  run FILE.mlir|GRAPH.json [--devices N] [--iters K] [--seed S]\n"
          "                                    partition, execute on N local devices, check numerics\n"
          "  calibrate [--out FILE] [--devices N] [--rank]\n"
          "                                    measure this machine, write a device profile; --rank:\n"
          "                                    check it ranks the benchmark suite as measured\n"
          "  compare A B [C D] [--profile NAME|FILE] [--format text|json]\n"
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

/* `shardplan backup PATH [--db DB] [--config FILE]`: argv[0] is "backup".
 * The database is found as `serve` finds it (flag, then SHARDPLAN_DB, then
 * the config file from --config or SHARDPLAN_CONFIG, then the default) and
 * copied with st_db_backup through a handle of its own, so a server running
 * on the same file keeps serving. A missing database is an error, never
 * created. Returns 0, 1 on failure, 2 for bad usage. */
static int backup_main(int argc, char **argv)
{
    const char *dest = NULL, *db_flag = NULL, *file = getenv("SHARDPLAN_CONFIG");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) {
            db_flag = argv[++i];
        } else if (strncmp(argv[i], "--db=", 5) == 0) {
            db_flag = argv[i] + 5;
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            file = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            file = argv[i] + 9;
        } else if (argv[i][0] != '-' && dest == NULL) {
            dest = argv[i];
        } else {
            dest = NULL;
            break;
        }
    }
    if (dest == NULL) {
        fputs("usage: shardplan backup PATH [--db DB] [--config FILE]\n", stderr);
        return 2;
    }
    srv_config c;
    cm_error err;
    cm_error_clear(&err);
    srv_config_init(&c);
    if ((file != NULL && srv_config_from_file(&c, file, &err) != CM_OK) ||
        srv_config_from_env(&c, &err) != CM_OK ||
        (db_flag != NULL && srv_config_set(&c, "db", db_flag, &err) != CM_OK)) {
        fprintf(stderr, "shardplan backup: %s\n", err.msg);
        return 2;
    }
    if (access(c.db_path, F_OK) != 0) {
        fprintf(stderr, "shardplan backup: no database at '%s'\n", c.db_path);
        return 1;
    }
    st_db *db = NULL;
    if (st_db_open(c.db_path, &db, &err) != CM_OK) {
        fprintf(stderr, "shardplan backup: %s: %s\n", c.db_path, err.msg);
        return 1;
    }
    cm_status st = st_db_backup(db, dest, &err);
    st_db_close(db);
    if (st != CM_OK) {
        fprintf(stderr, "shardplan backup: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "shardplan: backup of %s written to %s\n", c.db_path, dest);
    return 0;
}

/* `serve`: the signal handlers it needs, then the server (srv_app.h). */
static int serve_main(int argc, char **argv, FILE *out, FILE *errs)
{
    (void)out;
    (void)errs;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return srv_serve_main(argc, argv, &stop_flag);
}

static int token_main(int argc, char **argv, FILE *out, FILE *errs)
{
    (void)out;
    (void)errs;
    return srv_token_main(argc, argv);
}

static int backup_cmd(int argc, char **argv, FILE *out, FILE *errs)
{
    (void)out;
    (void)errs;
    return backup_main(argc, argv);
}

static int client_main(int argc, char **argv, FILE *out, FILE *errs)
{
    signal(SIGPIPE, SIG_IGN);
    return srv_client_main(argc, argv, out, errs);
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
    {"run", ex_run_main},
    {"exec-worker", ex_worker_main}, /* hidden: one benchmark run for srv_bench.c */
    {"calibrate", ex_calib_main},
    {"compare", cmd_compare},
    {"lint", cmd_lint},
    {"collectives", cmd_collectives},
    {"sweep", cmd_sweep},
    {"suggest", cmd_suggest},
    {"whatif", cmd_whatif},
    {"serve", serve_main},
    {"token", token_main},
    {"backup", backup_cmd},
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
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "shardplan: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
