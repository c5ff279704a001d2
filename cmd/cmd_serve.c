/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan serve`, `token` and `backup`, the commands of the plan
 * server (server/srv_app.h). Options come from flags, SHARDPLAN_* variables
 * and a config file, in that precedence. The one mutable global of the
 * server lives here (STYLE.md): the stop flag that SIGTERM/SIGINT set and
 * `serve` polls to shut down gracefully. */
#include "cmd.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "cmd_util.h"
#include "srv_app.h"
#include "st_db.h"

/* Set by SIGTERM/SIGINT; cmd_serve drains and exits when it is set. */
static volatile sig_atomic_t stop_flag = 0;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void serve_usage(FILE *f)
{
    fputs("usage: shardplan serve [--listen HOST:PORT] [--db PATH] [--config FILE]\n"
          "         [--log -|FILE|''] [--threads N] [--plan-workers N] [--max-body BYTES]\n"
          "         [--timeout SECONDS] [--idle-timeout SECONDS] [--drain SECONDS]\n"
          "         [--cache N] [--auth auto|on|off] [--insecure] [--web DIR]\n"
          "         [--bench-time-limit SECONDS] [--bench-memory MiB] [--bench-mpi LAUNCHER]\n"
          "         [--max-inflight-body BYTES] [--max-connections N] [--max-per-ip N]\n"
          "         [--head-timeout SECONDS] [--min-body-rate BYTES] [--compute-timeout SECONDS]\n"
          "         [--integrity-interval SECONDS] [--cors-origin ORIGIN|*]\n"
          "         [--plan-timeout SECONDS] [--max-long-per-client N]\n"
          "Every option also comes from SHARDPLAN_<NAME> (SHARDPLAN_LISTEN, SHARDPLAN_DB, ...)\n"
          "and from the config file (name = value lines). Precedence: flags, then\n"
          "environment, then file, then defaults.\n",
          f);
}

/* Flags override the environment, which overrides the file: the file is
 * found first (flag or SHARDPLAN_CONFIG), then applied in that order. */
static int load_config(int argc, char **argv, srv_config *c, const char *cmd, FILE *out,
                       FILE *errs)
{
    const char *file = getenv("SHARDPLAN_CONFIG");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            file = argv[i + 1];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            file = argv[i] + 9;
        }
    }
    cm_error err;
    cm_error_clear(&err);
    srv_config_init(c);
    if (file != NULL && srv_config_from_file(c, file, &err) != CM_OK) {
        fprintf(errs, "shardplan %s: %s\n", cmd, err.msg);
        return 2;
    }
    if (srv_config_from_env(c, &err) != CM_OK) {
        fprintf(errs, "shardplan %s: environment: %s\n", cmd, err.msg);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            continue; /* positional arguments belong to the subcommand */
        }
        char name[64];
        const char *value = NULL;
        const char *eq = strchr(a, '=');
        size_t n = eq != NULL ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof name) {
            fprintf(errs, "shardplan %s: unknown option '%s'\n", cmd, a);
            return 2;
        }
        memcpy(name, a + 2, n);
        name[n] = '\0';
        if (strcmp(name, "config") == 0) {
            i += eq == NULL;
            continue;
        }
        if (strcmp(name, "help") == 0) {
            serve_usage(out);
            return 1;
        }
        if (strcmp(name, "insecure") == 0 && eq == NULL) {
            value = "true";
        } else if (strcmp(name, "scope") == 0 || strcmp(name, "label") == 0) {
            i += eq == NULL; /* token options, read by the token command */
            continue;
        } else if (eq != NULL) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        }
        if (srv_config_set(c, name, value, &err) != CM_OK) {
            fprintf(errs, "shardplan %s: %s\n", cmd, err.msg);
            return 2;
        }
    }
    return 0;
}

int cmd_serve(int argc, char **argv, FILE *out, FILE *errs)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    srv_config c;
    int rc = load_config(argc, argv, &c, "serve", out, errs);
    if (rc != 0) {
        return rc == 1 ? 0 : rc;
    }
    cm_error err;
    cm_error_clear(&err);
    srv_app *app = NULL;
    /* the benchmark worker is this executable (`shardplan exec-worker`) */
    ssize_t n = readlink("/proc/self/exe", c.worker_path, sizeof c.worker_path - 1);
    c.worker_path[n > 0 ? (size_t)n : 0] = '\0';
    if (srv_app_create(&c, &app, &err) != CM_OK) {
        fprintf(errs, "shardplan serve: %s\n", err.msg);
        return 1;
    }
    if (srv_app_start(app, &err) != CM_OK) {
        fprintf(errs, "shardplan serve: %s\n", err.msg);
        srv_app_destroy(app);
        return 1;
    }
    bool v6 = strchr(c.host, ':') != NULL;
    fprintf(errs, "shardplan: listening on http://%s%s%s:%u/ (db %s, auth %s)\n",
            v6 ? "[" : "", c.host, v6 ? "]" : "", (unsigned)srv_app_port(app), c.db_path,
            srv_app_auth_required(app) ? "on" : "off");
    /* the integrity check of a big file runs beside listening (it reads the
     * whole file: seconds per GiB from a cold disk); say what it found */
    srv_check_state check = srv_app_start_check(app, NULL);
    struct stat sb;
    if (check == SRV_CHECK_RUNNING && stat(c.db_path, &sb) == 0) {
        fprintf(errs,
                "shardplan: checking %s (%lld MiB); /readyz says ready and the API answers "
                "once it passes\n",
                c.db_path, (long long)(sb.st_size >> 20));
    }
    double t0 = cm_now();
    while (stop_flag == 0) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (check != SRV_CHECK_RUNNING) {
            continue;
        }
        check = srv_app_start_check(app, &err);
        if (check == SRV_CHECK_SOUND) {
            fprintf(errs, "shardplan: %s passed its check in %.1f s\n", c.db_path, cm_now() - t0);
        } else if (check == SRV_CHECK_DAMAGED) {
            break;
        }
    }
    fprintf(errs, "shardplan: stopping (draining in-flight requests)\n");
    srv_app_destroy(app);
    if (check == SRV_CHECK_DAMAGED) {
        fprintf(errs, "shardplan serve: %s\n", err.msg);
        return 1;
    }
    fprintf(errs, "shardplan: stopped\n");
    return 0;
}

static void token_usage(FILE *f)
{
    fputs("usage: shardplan token create --scope read|write|admin [--label L] [--db PATH]\n"
          "       shardplan token import FILE --scope read|write|admin [--label L] [--db PATH]\n"
          "         (stores the token on FILE's first line, e.g. a deployment secret;\n"
          "          a token already stored is left as it is)\n"
          "       shardplan token list [--db PATH]\n"
          "       shardplan token revoke ID [--db PATH]\n",
          f);
}

/* `token import FILE`: the first line of FILE (without its line end) as a
 * token of the given scope; already stored is success. */
static int token_import(st_db *db, const char *path, st_scope scope, const char *label,
                        FILE *errs)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(errs, "shardplan token: %s: %s\n", path, strerror(errno));
        return 1;
    }
    char line[ST_TOKEN_MAX_LEN + 3];
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    size_t n = got ? strcspn(line, "\r\n") : 0;
    if (!got || n == sizeof line - 1) {
        fprintf(errs, "shardplan token: %s: %s\n", path,
                got ? "first line longer than a token can be" : "empty file");
        return 1;
    }
    line[n] = '\0';
    cm_error err;
    cm_error_clear(&err);
    int64_t id = 0;
    cm_status st = st_token_put(db, line, scope, label, &id, &err);
    for (volatile char *q = line; q < line + sizeof line; q++) {
        *q = 0; /* the secret does not outlive its use */
    }
    if (st == CM_ECONFLICT) {
        fprintf(errs, "token from %s is already stored\n", path);
        return 0;
    }
    if (st != CM_OK) {
        fprintf(errs, "shardplan token: %s: %s\n", path, err.msg);
        return 1;
    }
    fprintf(errs, "token %lld (scope %s) imported from %s\n", (long long)id,
            st_scope_name(scope), path);
    return 0;
}

int cmd_token(int argc, char **argv, FILE *out, FILE *errs)
{
    if (cmd_wants_help(argc, argv)) {
        token_usage(out);
        return 0;
    }
    if (argc < 2) {
        token_usage(errs);
        return 2;
    }
    srv_config c;
    int rc = load_config(argc - 1, argv + 1, &c, "token", out, errs);
    if (rc != 0) {
        return rc == 1 ? 0 : rc;
    }
    const char *scope_s = NULL, *label = NULL, *pos = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--scope") == 0 && i + 1 < argc) {
            scope_s = argv[++i];
        } else if (strncmp(argv[i], "--scope=", 8) == 0) {
            scope_s = argv[i] + 8;
        } else if (strcmp(argv[i], "--label") == 0 && i + 1 < argc) {
            label = argv[++i];
        } else if (strncmp(argv[i], "--label=", 8) == 0) {
            label = argv[i] + 8;
        } else if (strncmp(argv[i], "--", 2) == 0) {
            i += strchr(argv[i], '=') == NULL && strcmp(argv[i], "--insecure") != 0;
        } else if (pos == NULL) {
            pos = argv[i];
        }
    }
    cm_error err;
    cm_error_clear(&err);
    if (srv_db_dir_make(c.db_path, &err) != CM_OK) {
        fprintf(errs, "shardplan token: %s\n", err.msg);
        return 1;
    }
    st_db *db = NULL;
    if (st_db_open(c.db_path, &db, &err) != CM_OK) {
        fprintf(errs, "shardplan token: %s: %s\n", c.db_path, err.msg);
        return 1;
    }
    rc = 0;
    if (strcmp(argv[1], "create") == 0) {
        st_scope scope;
        if (scope_s == NULL || !st_scope_parse(scope_s, &scope)) {
            token_usage(errs);
            rc = 2;
        } else {
            char tok[ST_TOKEN_LEN + 1];
            int64_t id = 0;
            if (st_token_create(db, scope, label, tok, &id, &err) != CM_OK) {
                fprintf(errs, "shardplan token: %s\n", err.msg);
                rc = 1;
            } else {
                fprintf(out, "%s\n", tok);
                fprintf(errs, "token %lld (scope %s) created; it is shown only once\n",
                        (long long)id, st_scope_name(scope));
            }
        }
    } else if (strcmp(argv[1], "import") == 0 && pos != NULL) {
        st_scope scope;
        if (scope_s == NULL || !st_scope_parse(scope_s, &scope)) {
            token_usage(errs);
            rc = 2;
        } else {
            rc = token_import(db, pos, scope, label != NULL ? label : "imported", errs);
        }
    } else if (strcmp(argv[1], "list") == 0) {
        st_token_query q;
        st_token_query_init(&q);
        q.limit = ST_LIST_MAX_LIMIT;
        st_token_list l;
        memset(&l, 0, sizeof l);
        if (st_token_list_query(db, &q, &l, &err) != CM_OK) {
            fprintf(errs, "shardplan token: %s\n", err.msg);
            rc = 1;
        } else {
            fprintf(out, "%-6s %-14s %-6s %s\n", "ID", "PREFIX", "SCOPE", "LABEL");
            for (size_t i = 0; i < l.n_items; i++) {
                fprintf(out, "%-6lld %-14s %-6s %s\n", (long long)l.items[i].id, l.items[i].prefix,
                        st_scope_name(l.items[i].scope), l.items[i].label);
            }
        }
        st_token_list_fini(&l);
    } else if (strcmp(argv[1], "revoke") == 0 && pos != NULL) {
        if (st_token_delete(db, strtoll(pos, NULL, 10), &err) != CM_OK) {
            fprintf(errs, "shardplan token: %s\n", err.msg);
            rc = 1;
        }
    } else {
        token_usage(errs);
        rc = 2;
    }
    st_db_close(db);
    return rc;
}

/* `shardplan backup PATH [--db DB] [--config FILE]`: argv[0] is "backup".
 * The database is found as `serve` finds it (flag, then SHARDPLAN_DB, then
 * the config file from --config or SHARDPLAN_CONFIG, then the default) and
 * copied with st_db_backup through a handle of its own, so a server running
 * on the same file keeps serving. A missing database is an error, never
 * created. Returns 0, 1 on failure, 2 for bad usage. */
int cmd_backup(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *dest = NULL, *db_flag = NULL, *file = getenv("SHARDPLAN_CONFIG");
    if (cmd_wants_help(argc, argv)) {
        fputs("usage: shardplan backup PATH [--db DB] [--config FILE]\n"
              "  an online copy of the database to PATH (safe while a server runs on it)\n",
              out);
        return 0;
    }
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
        fputs("usage: shardplan backup PATH [--db DB] [--config FILE]\n", errs);
        return 2;
    }
    srv_config c;
    cm_error err;
    cm_error_clear(&err);
    srv_config_init(&c);
    if ((file != NULL && srv_config_from_file(&c, file, &err) != CM_OK) ||
        srv_config_from_env(&c, &err) != CM_OK ||
        (db_flag != NULL && srv_config_set(&c, "db", db_flag, &err) != CM_OK)) {
        fprintf(errs, "shardplan backup: %s\n", err.msg);
        return 2;
    }
    if (access(c.db_path, F_OK) != 0) {
        fprintf(errs, "shardplan backup: no database at '%s'\n", c.db_path);
        return 1;
    }
    st_db *db = NULL;
    if (st_db_open(c.db_path, &db, &err) != CM_OK) {
        fprintf(errs, "shardplan backup: %s: %s\n", c.db_path, err.msg);
        return 1;
    }
    cm_status st = st_db_backup(db, dest, &err);
    st_db_close(db);
    if (st != CM_OK) {
        fprintf(errs, "shardplan backup: %s\n", err.msg);
        return 1;
    }
    fprintf(errs, "shardplan: backup of %s written to %s\n", c.db_path, dest);
    return 0;
}
