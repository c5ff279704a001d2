/* SPDX-License-Identifier: Apache-2.0
 * planner: the keyword-style custom syntax of StableHLO ops (see
 * sp_mlir_int.h), as StableHLO's own printer writes it. */
#include "sp_mlir_int.h"

#define SAME(k)                                                                                    \
    {                                                                                              \
        k, SP_TY_SAME, { {0} }                                                                     \
    }
#define FUNC(k)                                                                                    \
    {                                                                                              \
        k, SP_TY_FUNC, { {0} }                                                                     \
    }

static const sp_pretty table[] = {
    /* element-wise and other SameOperandsAndResultType ops */
    SAME(SP_OP_ABS), SAME(SP_OP_ADD), SAME(SP_OP_AND), SAME(SP_OP_ATAN2), SAME(SP_OP_CBRT),
    SAME(SP_OP_CEIL), SAME(SP_OP_CLAMP), SAME(SP_OP_COMPLEX), SAME(SP_OP_CONVERT),
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
    {SP_OP_SELECT, SP_TY_SELECT, {{0}}},
    {SP_OP_OPTIMIZATION_BARRIER, SP_TY_LIST, {{0}}},
    {SP_OP_RETURN, SP_TY_LIST, {{0}}},
    /* keyword clauses */
    {SP_OP_BROADCAST_IN_DIM, SP_TY_FUNC, {{"dims", "broadcast_dimensions", SP_CL_DARR, NULL, NULL}}},
    {SP_OP_BROADCAST, SP_TY_FUNC, {{"sizes", "broadcast_sizes", SP_CL_DARR, NULL, NULL}}},
    {SP_OP_TRANSPOSE, SP_TY_FUNC, {{"dims", "permutation", SP_CL_DARR, NULL, NULL}}},
    {SP_OP_REVERSE, SP_TY_SAME, {{"dims", "dimensions", SP_CL_DARR, NULL, NULL}}},
    {SP_OP_CONCATENATE, SP_TY_FUNC, {{"dim", "dimension", SP_CL_INT, NULL, "i64"}}},
    {SP_OP_IOTA, SP_TY_SAME, {{"dim", "iota_dimension", SP_CL_INT, NULL, "i64"}}},
    {SP_OP_DYNAMIC_IOTA, SP_TY_FUNC, {{"dim", "iota_dimension", SP_CL_INT, NULL, "i64"}}},
    {SP_OP_GET_DIMENSION_SIZE, SP_TY_FUNC, {{"dim", "dimension", SP_CL_INT, NULL, "i64"}}},
    {SP_OP_SET_DIMENSION_SIZE, SP_TY_FUNC, {{"dim", "dimension", SP_CL_INT, NULL, "i64"}}},
    {SP_OP_DYNAMIC_SLICE, SP_TY_FUNC, {{"sizes", "slice_sizes", SP_CL_DARR, NULL, NULL}}},
    {SP_OP_PAD,
     SP_TY_FUNC,
     {{"low", "edge_padding_low", SP_CL_DARR, NULL, NULL},
      {"high", "edge_padding_high", SP_CL_DARR, NULL, NULL},
      {"interior", "interior_padding", SP_CL_DARR, NULL, NULL}}},
    {SP_OP_CHOLESKY, SP_TY_SAME, {{"lower", "lower", SP_CL_BOOL, NULL, NULL}}},
    {SP_OP_REDUCE_PRECISION, SP_TY_SAME, {{"format", "exponent_bits", SP_CL_FORMAT, NULL, NULL}}},
    {SP_OP_FFT,
     SP_TY_FUNC,
     {{"type", "fft_type", SP_CL_ENUM, "fft_type", NULL},
      {"length", "fft_length", SP_CL_DARR, NULL, NULL}}},
    {SP_OP_RNG_BIT_GENERATOR,
     SP_TY_FUNC,
     {{"algorithm", "rng_algorithm", SP_CL_ENUM, "rng_algorithm", NULL}}},
    {SP_OP_RNG, SP_TY_FUNC, {{"distribution", "rng_distribution", SP_CL_ENUM, "rng_distribution", NULL}}},
    {SP_OP_DOT, SP_TY_FUNC, {{"precision", "precision_config", SP_CL_PRECISION, "precision", NULL}}},
    {SP_OP_DOT_GENERAL,
     SP_TY_FUNC,
     {{"batching_dims", "dot_dimension_numbers", SP_CL_DOTDIMS, NULL, NULL},
      {"contracting_dims", "dot_dimension_numbers", SP_CL_DOTDIMS, NULL, NULL},
      {"precision", "precision_config", SP_CL_PRECISION, "precision", NULL},
      {"algorithm", "algorithm", SP_CL_ALGORITHM, NULL, NULL}}},
    {SP_OP_EINSUM, SP_TY_FUNC, {{"config", "einsum_config", SP_CL_STR, NULL, NULL}}},
    {SP_OP_UNARY_EINSUM, SP_TY_FUNC, {{"config", "einsum_config", SP_CL_STR, NULL, NULL}}},
};

const sp_pretty *sp_mlir_pretty(sp_op_kind kind)
{
    /* The table is small; a linear scan once per op is cheap next to parsing. */
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].kind == kind) {
            return &table[i];
        }
    }
    return NULL;
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
