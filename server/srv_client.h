/* SPDX-License-Identifier: Apache-2.0
 * server: `shardplan client`, the command-line client of the HTTP API over
 * libcurl (the only server module that uses libcurl). It prints the server's
 * JSON, or a readable table with --table, and exits non-zero with the
 * server's error message. Thread contract: call from the main thread (it
 * initializes libcurl globally). */
#ifndef SRV_CLIENT_H
#define SRV_CLIENT_H

#include <stdio.h>

/* `shardplan client --server URL [--token T] [--table] COMMAND ...`: argv[0]
 * is "client". Commands: submit, plan, get, list, put, delete, compare,
 * bench, health (see `client --help`). URL and token also come from
 * SHARDPLAN_SERVER and SHARDPLAN_TOKEN. Returns 0 on success, 1 when the
 * server answered an error or could not be reached, 2 for bad usage. */
int srv_client_main(int argc, char **argv, FILE *out, FILE *errs);

#endif /* SRV_CLIENT_H */
