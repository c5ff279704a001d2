/* SPDX-License-Identifier: Apache-2.0
 * planner: MLIR text in and out. The reader takes the generic and pretty
 * forms of the StableHLO, func and sdy ops (what `jax.jit(f).lower(x).as_text()`
 * prints and what Shardy's lit tests hold) into an sp_module; the printer
 * writes a module back as sdy_opt would. Thread contract: one module per
 * call; the tables behind both are read-only. */
#ifndef SP_MLIR_H
#define SP_MLIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_ir.h"

/* ---- reading and printing -------------------------------------------------- */

/* Reads one module from MLIR text (generic and pretty forms of the StableHLO,
 * func and sdy ops). line_base is added to reported line numbers (for
 * `// -----` chunks). Errors: CM_EINVAL with err->path "LINE:COL"; CM_ENOMEM.
 * On error *out is NULL. text need not be NUL-terminated. */
cm_status sp_mlir_read(const char *text, size_t len, uint32_t line_base, sp_module **out,
                       cm_error *err);
/* As sp_mlir_read; on a parse error, notes (may be NULL) also receives the
 * further errors MLIR reports with it (sp_parse_notes, at LINE:COL), such as
 * "failed to parse Sdy_TensorSharding parameter 'dim_shardings' ...". */
cm_status sp_mlir_read_ex(const char *text, size_t len, uint32_t line_base, sp_module **out,
                          sp_parse_notes *notes, cm_error *err);

typedef struct sp_print_opts {
    bool generic;    /* print every op in generic form */
    bool debug_info; /* print loc(...) */
} sp_print_opts;

/* Appends the module in MLIR's textual form, one op per line. */
void sp_mlir_print(const sp_module *m, const sp_print_opts *opts, cm_buf *b);
/* As sp_mlir_print, as sdy_opt prints: that tool registers neither the check
 * nor the interpreter dialect, so their ops print in the generic form. */
void sp_mlir_print_sdy_opt(const sp_module *m, const sp_print_opts *opts, cm_buf *b);

/* Appends the name value v gets when m is printed ("%0", "%cst_1",
 * "%arg0", "%2#1"), numbering m as sp_mlir_print does. */
void sp_mlir_value_name(const sp_module *m, uint32_t v, cm_buf *b);

/* Appends v as MLIR prints a float of element type e (printFloatValue:
 * "1.000000e+00", else the shortest form that reads back, else the bits
 * "0x7FC00000"). */
void sp_mlir_print_float_value(cm_buf *b, double v, sp_elem e);

/* Parses one attribute value (`array<i64: 0, 1>`, `#stablehlo.dot<...>`,
 * `"text"`, `dense<0.0> : tensor<f32>`) or one type (`tensor<8x16xf32>`) in
 * MLIR syntax into module m, with the canonical kinds sp_mlir_read produces.
 * The whole text must be consumed (whitespace aside). *out is arena-owned by
 * m. Errors: CM_EINVAL with err->path "1:COL", CM_ENOMEM. */
cm_status sp_mlir_parse_attr(sp_module *m, const char *text, size_t len, sp_attr **out,
                             cm_error *err);
cm_status sp_mlir_parse_type(sp_module *m, const char *text, size_t len, uint32_t *type_out,
                             cm_error *err);

/* Decodes the elements of dense attribute a exactly, one uint64_t per
 * scalar in row-major order (a complex element is two: real, imaginary):
 * integers as their two's-complement bits masked to the element width
 * (INT64_MAX and UINT64_MAX stay exact), i1 as 0/1, floats (f64 down to
 * f4E2M1FN, sp_float.h) as their bit patterns, with decimal literals rounded to the
 * element type and hex literals taken as bit patterns, also inside lists;
 * a quoted `"0x..."` body is raw little-endian bytes, one element's worth a
 * splat. A splat fills the tensor; an empty tensor gives no values.
 * *out is allocated in arena; *n_out is the count of scalars. Errors:
 * CM_EINVAL (not dense, a dynamic shape, an element type it does not
 * decode, a malformed or mismatched body), CM_ENOMEM. */
cm_status sp_mlir_dense_values(const sp_module *m, const sp_attr *a, cm_arena *arena,
                               uint64_t **out, size_t *n_out, cm_error *err);

#endif /* SP_MLIR_H */
