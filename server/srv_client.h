/* SPDX-License-Identifier: Apache-2.0
 * server: `shardplan client`, the command-line client of the HTTP API over
 * libcurl (the only server module that uses libcurl). It prints the server's
 * JSON, or a readable table with --table, and exits non-zero with the
 * server's error message. Thread contract: call from the main thread (it
 * initializes libcurl globally). */
#ifndef SRV_CLIENT_H
#define SRV_CLIENT_H

#include "cm.h"

#include <stdio.h>

/* `shardplan client --server URL [--token T] [--table] COMMAND ...`: argv[0]
 * is "client". Commands: submit, plan, get, list, put, delete, compare,
 * bench, health (see `client --help`). URL and token also come from
 * SHARDPLAN_SERVER and SHARDPLAN_TOKEN. Returns 0 on success, 1 when the
 * server answered an error or could not be reached, 2 for bad usage. */
int srv_client_main(int argc, char **argv, FILE *out, FILE *errs);

/* POSTs body (body_len bytes of JSON) to url once, within timeout_s
 * seconds, without following redirects; *status_out is the HTTP status (0
 * when none arrived). The benchmark webhook (srv_bench.c). Errors: CM_EIO
 * with libcurl's message. Thread safety: any thread (libcurl >= 7.84
 * initializes itself safely). */
cm_status srv_client_post_json(const char *url, const char *body, size_t body_len,
                               double timeout_s, long *status_out, cm_error *err);

#endif /* SRV_CLIENT_H */
