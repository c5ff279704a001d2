/* SPDX-License-Identifier: Apache-2.0
 * planner: diagnostics and verification. Passes report what a user must see
 * (Shardy's errors and warnings) as a list of located messages; the verifier
 * checks a module's meshes, shardings and rules against each other. Thread
 * contract: one list per thread. */
#ifndef SP_DIAG_H
#define SP_DIAG_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_ir.h"

/* ---- diagnostics -------------------------------------------------------------
 * Passes report what a user must see (Shardy's errors and warnings) here, with
 * the location of the op; `shardplan opt -verify-diagnostics` matches them to
 * `expected-error` comments. */
typedef enum sp_diag_sev { SP_DIAG_ERROR, SP_DIAG_WARNING, SP_DIAG_REMARK, SP_DIAG_NOTE } sp_diag_sev;

typedef struct sp_diag {
    sp_diag_sev sev;
    uint32_t op;       /* op id or SP_NONE */
    uint32_t line;     /* 1-based, 0 when unknown */
    uint32_t col;
    char *msg;         /* heap, owned by the list */
} sp_diag;

/* Warnings Shardy gives once per process (llvm::once_flag). A list gives
 * each at most once: `shardplan opt` carries the bits from one chunk's list
 * to the next (one process, as sdy_opt), while each plan a server makes has
 * its own list, so the same input always gets the same warnings. */
typedef enum sp_diag_once {
    SP_DIAG_ONCE_MULTI_CALL = 1u << 0,          /* import-func-calls */
    SP_DIAG_ONCE_UNKNOWN_CUSTOM_CALL = 1u << 1, /* the sharding-rule registry */
    SP_DIAG_ONCE_UNKNOWN_OP = 1u << 2,          /* the sharding-rule registry */
} sp_diag_once;

typedef struct sp_diags {
    sp_diag *items;
    uint32_t n, cap;
    bool oom;          /* a diagnostic was dropped for lack of memory */
    uint32_t once;     /* sp_diag_once bits already given */
} sp_diags;

/* "error", "warning", "remark" or "note", as MLIR spells the severity
 * (a static string; "error" for a value outside the enum). */
const char *sp_diag_sev_name(sp_diag_sev sev);

void sp_diags_init(sp_diags *d);
void sp_diags_fini(sp_diags *d);
/* Adds a diagnostic located at op (SP_NONE: no location). */
void sp_diags_add(sp_diags *d, const sp_module *m, uint32_t op, sp_diag_sev sev, const char *fmt,
                  ...) __attribute__((format(printf, 5, 6)));
/* True the first time key is asked of d (and marks it given); false for a
 * NULL list, which reports nothing. */
bool sp_diags_once(sp_diags *d, sp_diag_once key);


/* Verifies meshes, every attached sharding (known mesh, rank, axes) and
 * attached sharding rules, adding an error diagnostic per finding. Returns
 * CM_EINVAL when anything is wrong. */
cm_status sp_module_verify(sp_module *m, sp_diags *d);

#endif /* SP_DIAG_H */
