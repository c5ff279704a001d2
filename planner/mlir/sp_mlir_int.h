/* SPDX-License-Identifier: Apache-2.0
 * planner (private): the table of StableHLO ops with a keyword-style custom
 * syntax, shared by the MLIR reader and printer so that both agree on it:
 *   stablehlo.NAME %a, %b, key = value, key = value attr-dict : types
 * Ops outside this table either have hand-written syntax in sp_mlir_read.c /
 * sp_mlir_print.c (SP_MLIR_CUSTOM_FORMS) or are read and written in the
 * generic form. */
#ifndef SP_MLIR_INT_H
#define SP_MLIR_INT_H

#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_mlir.h"

typedef enum sp_clause_kind {
    SP_CL_DARR,      /* key = [1, 2]           -> array<i64: 1, 2> */
    SP_CL_INT,       /* key = 3                -> 3 : i64 */
    SP_CL_BOOL,      /* key = true             -> true */
    SP_CL_ENUM,      /* key = PHILOX           -> #stablehlo<enum_kind PHILOX> */
    SP_CL_STR,       /* key = "ab,bc->ac"      -> "..." */
    SP_CL_PRECISION, /* precision = [DEFAULT, HIGH] -> [#stablehlo<precision DEFAULT>, ...] */
    SP_CL_FORMAT,    /* format = e8m10         -> exponent_bits = 8 : i32, mantissa_bits = 10 : i32 */
    SP_CL_DOTDIMS,   /* batching_dims = [0] x [0], contracting_dims = [1] x [0] */
    SP_CL_ALGORITHM  /* algorithm = <k = v, ...> -> #stablehlo.dot_algorithm<...> */
} sp_clause_kind;

typedef struct sp_clause {
    const char *key;       /* as written in the custom syntax */
    const char *attr;      /* canonical attribute name */
    sp_clause_kind kind;
    const char *enum_kind; /* for SP_CL_ENUM / SP_CL_PRECISION */
    const char *int_type;  /* for SP_CL_INT: "i64" */
} sp_clause;

typedef enum sp_typing {
    SP_TY_SAME,   /* `: T` when every operand and the result are T, else functional */
    SP_TY_FUNC,   /* always `: (Ts) -> R` */
    SP_TY_LIST,   /* `: T1, T2` — operand types; results have the same types */
    SP_TY_SELECT  /* `: P, T` when operands 1.. and result are T, else functional */
} sp_typing;

#define SP_MAX_CLAUSES 4

typedef struct sp_pretty {
    sp_op_kind kind;
    sp_typing typing;
    sp_clause clauses[SP_MAX_CLAUSES];
} sp_pretty;

/* The table entry for kind, or NULL when the op has no keyword-style syntax. */
const sp_pretty *sp_mlir_pretty(sp_op_kind kind);

/* The ops with a hand-written custom syntax, by kind, and the name of the
 * function that reads it (sp_mlir_read.c) and prints it (sp_mlir_print.c),
 * so that the reader and the printer agree on which forms exist. Other sdy
 * ops have theirs in the files' sdy_op; everything else is generic. */
#define SP_MLIR_CUSTOM_FORMS(X)                                                                    \
    X(SP_OP_FUNC_FUNC, func_op)                                                                    \
    X(SP_OP_FUNC_RETURN, func_return_op)                                                           \
    X(SP_OP_SDY_RETURN, func_return_op)                                                            \
    X(SP_OP_FUNC_CALL, call_op)                                                                    \
    X(SP_OP_CONSTANT, constant_op)                                                                 \
    X(SP_OP_COMPARE, compare_op)                                                                   \
    X(SP_OP_SLICE, slice_op)                                                                       \
    X(SP_OP_CUSTOM_CALL, custom_call_op)                                                           \
    X(SP_OP_CONVOLUTION, convolution_op)                                                           \
    X(SP_OP_REDUCE, reduce_op)                                                                     \
    X(SP_OP_WHILE, while_op)                                                                       \
    X(SP_OP_SDY_MESH, mesh_op)                                                                     \
    X(SP_OP_TUPLE, tuple_op)                                                                       \
    X(SP_OP_GET_TUPLE_ELEMENT, get_tuple_element_op)                                               \
    X(SP_OP_COMPOSITE, composite_op) \
    X(SP_OP_COMPLEX, complex_op)

/* The custom forms of the check and interpreter dialects' ops (what
 * StableHLO's interpreter tests use), shared by the reader and printer:
 *   NAME %a[, %b][, VALUE][, key = v]... attr-dict [: T[, T]]
 * (check.expect_close writes its attr-dict after the ':'). */
typedef struct sp_test_kwarg {
    const char *key;  /* as written: "tolerance", "iter" */
    const char *attr; /* attribute name: "tolerance", "iteration" */
    char kind;        /* 'f' float, 'i' integer, 's' string */
    const char *type; /* "f64", "ui64", "ui32" or NULL */
    bool optional;
} sp_test_kwarg;

typedef struct sp_test_form {
    const char *name;
    uint32_t n_operands;   /* SSA operands first */
    bool value;            /* then a constant `dense<...> : T` (attribute "value") */
    sp_test_kwarg args[2]; /* then keyword arguments (key NULL: none) */
    uint32_t n_types;      /* types after ':' (the operands'), 0: no ':' */
    bool dict_after_colon; /* the attr-dict follows the ':' */
    bool result;           /* one result with the first operand's type */
} sp_test_form;

/* The form of the op named name (len bytes), or NULL. */
const sp_test_form *sp_mlir_test_form(const char *name, size_t len);

/* Decodes a string literal body escape sequence set; shared by reader and printer. */
void sp_mlir_print_string(cm_buf *b, const char *s, size_t len);

/* Appends a float attribute value the way MLIR prints it: six significant
 * digits in scientific form (`1.000000e-03`) when that reads back to the same
 * value of the attribute's type, else APFloat's round-tripping form
 * (`0.33333333333333331`), else the bit pattern in hex (`0x7FC00000`, also
 * for infinities and NaNs). lit is the literal as read (decimal or hex bit
 * pattern) or NULL to use v; type is "f32", "f64", "f16", "bf16" or NULL
 * (f64); other float types print lit unchanged. */
void sp_mlir_print_float(cm_buf *b, double v, const char *lit, const char *type);

#endif /* SP_MLIR_INT_H */
