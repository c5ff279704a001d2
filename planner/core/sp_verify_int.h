/* SPDX-License-Identifier: Apache-2.0
 * planner/core private: the pieces of the module verifier (sp_verify.c) that
 * live in their own files. Each adds error diagnostics located at the op and
 * sets *bad when it finds anything. Thread contract: read-only on the module
 * except for the scratch arena; no state. */
#ifndef SP_VERIFY_INT_H
#define SP_VERIFY_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_diag.h"
#include "sp_ir.h"

/* StableHLO's shape constraints (stablehlo spec, C1..Cn of each op) for op:
 * the result types the operands and attributes imply, dimension numbers in
 * range, sizes that must agree. Ops it does not know are left alone. Types
 * with dynamic dimensions are checked where their sizes are known. */
void sp_verify_op_shapes(sp_module *m, uint32_t op, sp_diags *d, bool *bad);

#endif /* SP_VERIFY_INT_H */
