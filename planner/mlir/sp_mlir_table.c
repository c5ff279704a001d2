/* SPDX-License-Identifier: Apache-2.0
 * planner: the keyword-style custom syntax of StableHLO ops (see
 * sp_mlir_int.h), as StableHLO's own printer writes it. */
#include "sp_mlir_int.h"
#include "sp_float.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Indexed by op kind (designated initializers); entries of other kinds
 * are zero, i.e. kind SP_OP_UNKNOWN. */
#define SAME(k) [k] = {k, SP_TY_SAME, {{0}}}
#define FUNC(k) [k] = {k, SP_TY_FUNC, {{0}}}

static const sp_pretty table[SP_OP_COUNT_] = {
    /* element-wise and other SameOperandsAndResultType ops */
    SAME(SP_OP_ABS), SAME(SP_OP_ADD), SAME(SP_OP_AND), SAME(SP_OP_ATAN2), SAME(SP_OP_CBRT),
    SAME(SP_OP_CEIL), SAME(SP_OP_CLAMP), SAME(SP_OP_CONVERT),
    SAME(SP_OP_COSINE), SAME(SP_OP_COUNT_LEADING_ZEROS), SAME(SP_OP_DIVIDE),
    SAME(SP_OP_EXPONENTIAL), SAME(SP_OP_EXPONENTIAL_MINUS_ONE), SAME(SP_OP_FLOOR),
    SAME(SP_OP_IMAG), SAME(SP_OP_IS_FINITE), SAME(SP_OP_LOG), SAME(SP_OP_LOG_PLUS_ONE),
    SAME(SP_OP_LOGISTIC), SAME(SP_OP_MAXIMUM), SAME(SP_OP_MINIMUM), SAME(SP_OP_MULTIPLY),
    SAME(SP_OP_NEGATE), SAME(SP_OP_NOT), SAME(SP_OP_OR), SAME(SP_OP_POPCNT), SAME(SP_OP_POWER),
    SAME(SP_OP_REAL), SAME(SP_OP_REMAINDER), SAME(SP_OP_ROUND_NEAREST_AFZ),
    SAME(SP_OP_ROUND_NEAREST_EVEN), SAME(SP_OP_RSQRT), SAME(SP_OP_SHIFT_LEFT),
    SAME(SP_OP_SHIFT_RIGHT_ARITHMETIC), SAME(SP_OP_SHIFT_RIGHT_LOGICAL), SAME(SP_OP_SIGN),
    SAME(SP_OP_SINE), SAME(SP_OP_SQRT), SAME(SP_OP_SUBTRACT), SAME(SP_OP_TAN), SAME(SP_OP_TANH),
    SAME(SP_OP_XOR), SAME(SP_OP_RESHAPE), SAME(SP_OP_BITCAST_CONVERT),
    SAME(SP_OP_DYNAMIC_UPDATE_SLICE), SAME(SP_OP_AFTER_ALL), SAME(SP_OP_REPLICA_ID),
    SAME(SP_OP_PARTITION_ID), SAME(SP_OP_CREATE_TOKEN), SAME(SP_OP_UNIFORM_QUANTIZE),
    SAME(SP_OP_UNIFORM_DEQUANTIZE), SAME(SP_OP_DYNAMIC_RESHAPE), SAME(SP_OP_REAL_DYNAMIC_SLICE),
    SAME(SP_OP_MHLO_COPY),
    FUNC(SP_OP_DYNAMIC_PAD),
    [SP_OP_SELECT] = {SP_OP_SELECT, SP_TY_SELECT, {{0}}},
    [SP_OP_OPTIMIZATION_BARRIER] = {SP_OP_OPTIMIZATION_BARRIER, SP_TY_LIST, {{0}}},
    [SP_OP_RETURN] = {SP_OP_RETURN, SP_TY_LIST, {{0}}},
    /* keyword clauses */
    [SP_OP_BROADCAST_IN_DIM] = {SP_OP_BROADCAST_IN_DIM, SP_TY_FUNC, {{"dims", "broadcast_dimensions", SP_CL_DARR, NULL, NULL}}},
    [SP_OP_DYNAMIC_BROADCAST_IN_DIM] = {SP_OP_DYNAMIC_BROADCAST_IN_DIM, SP_TY_FUNC, {{"dims", "broadcast_dimensions", SP_CL_DARR, NULL, NULL}}},
    [SP_OP_BROADCAST] = {SP_OP_BROADCAST, SP_TY_FUNC, {{"sizes", "broadcast_sizes", SP_CL_DARR, NULL, NULL}}},
    [SP_OP_TRANSPOSE] = {SP_OP_TRANSPOSE, SP_TY_FUNC, {{"dims", "permutation", SP_CL_DARR, NULL, NULL}}},
    [SP_OP_REVERSE] = {SP_OP_REVERSE, SP_TY_SAME, {{"dims", "dimensions", SP_CL_DARR, NULL, NULL}}},
    [SP_OP_CONCATENATE] = {SP_OP_CONCATENATE, SP_TY_FUNC, {{"dim", "dimension", SP_CL_INT, NULL, "i64"}}},
    [SP_OP_IOTA] = {SP_OP_IOTA, SP_TY_SAME, {{"dim", "iota_dimension", SP_CL_INT, NULL, "i64"}}},
    [SP_OP_DYNAMIC_IOTA] = {SP_OP_DYNAMIC_IOTA, SP_TY_FUNC, {{"dim", "iota_dimension", SP_CL_INT, NULL, "i64"}}},
    [SP_OP_GET_DIMENSION_SIZE] = {SP_OP_GET_DIMENSION_SIZE, SP_TY_FUNC, {{"dim", "dimension", SP_CL_INT, NULL, "i64"}}},
    [SP_OP_SET_DIMENSION_SIZE] = {SP_OP_SET_DIMENSION_SIZE, SP_TY_FUNC, {{"dim", "dimension", SP_CL_INT, NULL, "i64"}}},
    [SP_OP_DYNAMIC_SLICE] = {SP_OP_DYNAMIC_SLICE, SP_TY_FUNC, {{"sizes", "slice_sizes", SP_CL_DARR, NULL, NULL}}},
    [SP_OP_PAD] = {SP_OP_PAD,
     SP_TY_FUNC,
     {{"low", "edge_padding_low", SP_CL_DARR, NULL, NULL},
      {"high", "edge_padding_high", SP_CL_DARR, NULL, NULL},
      {"interior", "interior_padding", SP_CL_DARR, NULL, NULL}}},
    [SP_OP_CHOLESKY] = {SP_OP_CHOLESKY, SP_TY_SAME, {{"lower", "lower", SP_CL_BOOL, NULL, NULL}}},
    [SP_OP_REDUCE_PRECISION] = {SP_OP_REDUCE_PRECISION, SP_TY_SAME, {{"format", "exponent_bits", SP_CL_FORMAT, NULL, NULL}}},
    [SP_OP_FFT] = {SP_OP_FFT,
     SP_TY_FUNC,
     {{"type", "fft_type", SP_CL_ENUM, "fft_type", NULL},
      {"length", "fft_length", SP_CL_DARR, NULL, NULL}}},
    [SP_OP_RNG_BIT_GENERATOR] = {SP_OP_RNG_BIT_GENERATOR,
     SP_TY_FUNC,
     {{"algorithm", "rng_algorithm", SP_CL_ENUM, "rng_algorithm", NULL}}},
    [SP_OP_RNG] = {SP_OP_RNG, SP_TY_FUNC, {{"distribution", "rng_distribution", SP_CL_ENUM, "rng_distribution", NULL}}},
    [SP_OP_DOT] = {SP_OP_DOT, SP_TY_FUNC, {{"precision", "precision_config", SP_CL_PRECISION, "precision", NULL}}},
    [SP_OP_DOT_GENERAL] = {SP_OP_DOT_GENERAL,
     SP_TY_FUNC,
     {{"batching_dims", "dot_dimension_numbers", SP_CL_DOTDIMS, NULL, NULL},
      {"contracting_dims", "dot_dimension_numbers", SP_CL_DOTDIMS, NULL, NULL},
      {"precision", "precision_config", SP_CL_PRECISION, "precision", NULL},
      {"algorithm", "algorithm", SP_CL_ALGORITHM, NULL, NULL}}},
    [SP_OP_EINSUM] = {SP_OP_EINSUM, SP_TY_FUNC, {{"config", "einsum_config", SP_CL_STR, NULL, NULL}}},
    [SP_OP_UNARY_EINSUM] = {SP_OP_UNARY_EINSUM, SP_TY_FUNC, {{"config", "einsum_config", SP_CL_STR, NULL, NULL}}},
};

/* StableHLO's check dialect (stablehlo/tests/CheckOps.td) and the
 * interpreter's print and probe ops (stablehlo/reference/InterpreterOps.td). */
static const sp_test_form test_forms[] = {
    {"check.expect_almost_eq", 2, false, {{"tolerance", "tolerance", 'f', "f64", true}}, 1, false, false},
    {"check.expect_almost_eq_const", 1, true, {{"tolerance", "tolerance", 'f', "f64", true}}, 0, false, false},
    {"check.expect_close", 2, false,
     {{"max_ulp_difference", "max_ulp_difference", 'i', "ui64", false},
      {"min_ulp_difference", "min_ulp_difference", 'i', "ui64", true}}, 2, true, false},
    {"check.expect_eq", 2, false, {{NULL, NULL, 0, NULL, false}}, 1, false, false},
    {"check.expect_eq_const", 1, true, {{NULL, NULL, 0, NULL, false}}, 0, false, false},
    {"check.expect_serialized_eq", 1, false,
     {{"probe_id", "probe_id", 's', NULL, false}, {"iter", "iteration", 'i', "ui32", true}}, 1, false, false},
    {"interpreter.print", 1, false, {{NULL, NULL, 0, NULL, false}}, 1, false, false},
    {"interpreter.probe", 1, false, {{"probe_id", "probe_id", 's', NULL, false}}, 1, false, true},
};

const sp_test_form *sp_mlir_test_form(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof test_forms / sizeof test_forms[0]; i++) {
        if (strlen(test_forms[i].name) == len && memcmp(test_forms[i].name, name, len) == 0) {
            return &test_forms[i];
        }
    }
    return NULL;
}

const sp_pretty *sp_mlir_pretty(sp_op_kind kind)
{
    if (kind <= SP_OP_UNKNOWN || kind >= SP_OP_COUNT_ || table[kind].kind != kind) {
        return NULL;
    }
    return &table[kind];
}

void sp_mlir_print_string(cm_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    cm_buf_putc(b, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
            if (c == '\\') {
                cm_buf_append(b, "\\\\", 2);
            } else {
                char e[3] = {'\\', hex[c >> 4], hex[c & 15]};
                cm_buf_append(b, e, 3);
            }
        } else {
            cm_buf_putc(b, (char)c);
        }
    }
    cm_buf_putc(b, '"');
}

/* ---- float attributes -------------------------------------------------------- */

/* The float type a literal is printed for (f64 when none is named), or
 * SP_ELEM_OTHER. */
static sp_elem fsem_of(const char *type)
{
    if (type == NULL) {
        return SP_ELEM_F64;
    }
    sp_elem e = sp_elem_of_name(type, strlen(type));
    return sp_float_is(e) ? e : SP_ELEM_OTHER;
}

static bool same_value(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

/* Parses a decimal literal as format s would (correct rounding for f32/f64). */
static double parse_as(const char *text, sp_elem s)
{
    if (s == SP_ELEM_F32) {
        return (double)strtof(text, NULL);
    }
    return sp_float_round(s, strtod(text, NULL));
}

/* Decimal digits of |v| rounded to ndig significant digits (ties away from
 * zero, as APFloat rounds): digits without trailing zeros into dig, the
 * decimal exponent of the first digit into *e10. */
static int decimal_digits(double v, int ndig, char *dig, int *e10)
{
    char buf[64], exact[64];
    double a = fabs(v);
    snprintf(exact, sizeof exact, "%.40e", a);
    /* exact: d.ddd...e+XX; digit k (0-based) is at index k (+1 after the point) */
    bool tie = exact[ndig + 1] == '5';
    for (int k = ndig + 2; tie && k < 42; k++) {
        tie = exact[k] == '0';
    }
    snprintf(buf, sizeof buf, "%.*e", ndig - 1, tie ? nextafter(a, (double)INFINITY) : a);
    int n = 0;
    const char *q = buf;
    for (; *q != 'e'; q++) {
        if (*q != '.') {
            dig[n++] = *q;
        }
    }
    *e10 = atoi(q + 1);
    while (n > 1 && dig[n - 1] == '0') {
        n--;
    }
    dig[n] = '\0';
    return n;
}

void sp_mlir_print_float(cm_buf *b, double v, const char *lit, const char *type)
{
    sp_elem s = fsem_of(type);
    if (s == SP_ELEM_OTHER) {
        if (lit != NULL) {
            cm_buf_puts(b, lit);
        } else {
            cm_buf_printf(b, "%.6e", v);
        }
        return;
    }
    if (lit != NULL) {
        const char *d = lit[0] == '-' || lit[0] == '+' ? lit + 1 : lit;
        if (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) {
            /* a hex literal is the bit pattern */
            uint64_t u = strtoull(d, NULL, 16);
            v = sp_float_decode(s, u);
            if (isnan(v)) {
                cm_buf_printf(b, "0x%llX", (unsigned long long)u);
                return;
            }
        } else {
            v = parse_as(lit, s);
        }
    }
    v = sp_float_round(s, v);
    char dig[48], out[96];
    int e10;
    if (!isnan(v) && !isinf(v)) {
        /* six significant digits in scientific form, padded to six decimals */
        int n = decimal_digits(v, 6, dig, &e10);
        int o = 0;
        if (signbit(v)) {
            out[o++] = '-';
        }
        out[o++] = dig[0];
        out[o++] = '.';
        for (int k = 1; k < 7; k++) {
            out[o++] = k < n ? dig[k] : '0';
        }
        o += snprintf(out + o, sizeof out - (size_t)o, "e%c%02d", e10 < 0 ? '-' : '+',
                      e10 < 0 ? -e10 : e10);
        if (same_value(parse_as(out, s), v)) {
            cm_buf_append(b, out, (size_t)o);
            return;
        }
        /* APFloat::toString defaults: enough digits to round-trip, padding 3 */
        int prec = 2 + sp_float_precision(s) * 59 / 196;
        n = decimal_digits(v, prec, dig, &e10);
        int exp = e10 - (n - 1); /* exponent of the last digit */
        bool sci;
        if (exp >= 0) {
            sci = exp > 3 || n + exp > prec;
        } else {
            int msd = exp + n - 1;
            sci = msd < 0 && -msd > 3;
        }
        o = 0;
        if (signbit(v)) {
            out[o++] = '-';
        }
        if (sci) {
            out[o++] = dig[0];
            out[o++] = '.';
            if (n == 1) {
                out[o++] = '0';
            }
            for (int k = 1; k < n; k++) {
                out[o++] = dig[k];
            }
            o += snprintf(out + o, sizeof out - (size_t)o, "E%c%d", e10 < 0 ? '-' : '+',
                          e10 < 0 ? -e10 : e10);
        } else if (exp < 0) {
            int whole = exp + n;
            int k = 0;
            if (whole > 0) {
                for (; k < whole; k++) {
                    out[o++] = dig[k];
                }
                out[o++] = '.';
            } else {
                out[o++] = '0';
                out[o++] = '.';
                for (int z = 0; z < -whole; z++) {
                    out[o++] = '0';
                }
            }
            for (; k < n; k++) {
                out[o++] = dig[k];
            }
        }
        if (sci || exp < 0) {
            cm_buf_append(b, out, (size_t)o);
            return;
        }
    }
    /* infinities, NaNs, and integers that need every digit: the bit pattern */
    cm_buf_printf(b, "0x%llX", (unsigned long long)sp_float_encode(s, v));
}
