/* SPDX-License-Identifier: Apache-2.0
 * server: the benchmark service. One supervisor thread per srv_app claims
 * queued runs from the store and runs each in a child process
 * (`PATH exec-worker`, executor/ex_worker.h) under a time limit and an
 * address-space limit; a crash, a time-out or memory exhaustion fails that
 * run with the reason and the service goes on with the next. A finished
 * run's JSON is POSTed to its webhook (loopback http only). See
 * docs/executor.md "The benchmark service". */
#ifndef SRV_BENCH_H
#define SRV_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "cm.h"

typedef struct srv_app srv_app;

/* Checks a webhook URL: http:// to a loopback host (127.0.0.0/8, [::1],
 * localhost), at most 512 bytes. Errors: CM_EINVAL at path. */
cm_status srv_bench_webhook_check(const char *url, const char *path, cm_error *err);

/* Starts the supervisor thread (a no-op when the config names no
 * worker_path: runs then stay queued); runs left "running" by an earlier process
 * are failed first with "server stopped". Errors: CM_ENOMEM, CM_EIO. */
cm_status srv_bench_start(srv_app *app, cm_error *err);

/* Stops the supervisor: a worker still running is killed and its run marked
 * failed "server stopped" (no webhook). Idempotent; before start a no-op. */
void srv_bench_stop(srv_app *app);

/* Asks the supervisor to kill the worker of run id and waits up to timeout_s
 * until it is gone; the run then ends "canceled" (reason "canceled by
 * request") and its webhook is called. True when id was the run being
 * executed, false otherwise (queued, final, or not in this process). */
bool srv_bench_cancel(srv_app *app, int64_t id, double timeout_s);

/* Wakes the supervisor after a run was queued (it also polls). */
void srv_bench_kick(srv_app *app);

#endif /* SRV_BENCH_H */
