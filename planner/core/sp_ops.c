/* SPDX-License-Identifier: Apache-2.0
 * planner: the op-name table, generated once from sp_ops.h and kept sorted by
 * name so lookups are a binary search, and the name and trait columns of
 * SP_OP_LIST indexed by kind. */
#include "sp_ops.h"

#include <string.h>

typedef struct op_entry {
    const char *name;
    sp_op_kind kind;
} op_entry;

static const op_entry by_name[] = {
    {"chlo.acos", SP_OP_CHLO_ACOS},
    {"chlo.acosh", SP_OP_CHLO_ACOSH},
    {"chlo.asin", SP_OP_CHLO_ASIN},
    {"chlo.asinh", SP_OP_CHLO_ASINH},
    {"chlo.atan", SP_OP_CHLO_ATAN},
    {"chlo.atanh", SP_OP_CHLO_ATANH},
    {"chlo.bessel_i1e", SP_OP_CHLO_BESSEL_I1E},
    {"chlo.conj", SP_OP_CHLO_CONJ},
    {"chlo.cosh", SP_OP_CHLO_COSH},
    {"chlo.digamma", SP_OP_CHLO_DIGAMMA},
    {"chlo.erf", SP_OP_CHLO_ERF},
    {"chlo.erf_inv", SP_OP_CHLO_ERF_INV},
    {"chlo.erfc", SP_OP_CHLO_ERFC},
    {"chlo.is_inf", SP_OP_CHLO_IS_INF},
    {"chlo.is_neg_inf", SP_OP_CHLO_IS_NEG_INF},
    {"chlo.is_pos_inf", SP_OP_CHLO_IS_POS_INF},
    {"chlo.lgamma", SP_OP_CHLO_LGAMMA},
    {"chlo.mulhi", SP_OP_CHLO_MULHI},
    {"chlo.next_after", SP_OP_CHLO_NEXT_AFTER},
    {"chlo.polygamma", SP_OP_CHLO_POLYGAMMA},
    {"chlo.sinh", SP_OP_CHLO_SINH},
    {"chlo.square", SP_OP_CHLO_SQUARE},
    {"chlo.tan", SP_OP_CHLO_TAN},
    {"chlo.top_k", SP_OP_CHLO_TOP_K},
    {"chlo.zeta", SP_OP_CHLO_ZETA},
    {"func.call", SP_OP_FUNC_CALL},
    {"func.func", SP_OP_FUNC_FUNC},
    {"func.return", SP_OP_FUNC_RETURN},
    {"mhlo.copy", SP_OP_MHLO_COPY},
    {"sdy.all_gather", SP_OP_SDY_ALL_GATHER},
    {"sdy.all_reduce", SP_OP_SDY_ALL_REDUCE},
    {"sdy.all_slice", SP_OP_SDY_ALL_SLICE},
    {"sdy.all_to_all", SP_OP_SDY_ALL_TO_ALL},
    {"sdy.collective_permute", SP_OP_SDY_COLLECTIVE_PERMUTE},
    {"sdy.constant", SP_OP_SDY_CONSTANT},
    {"sdy.data_flow_edge", SP_OP_SDY_DATA_FLOW_EDGE},
    {"sdy.func_data_flow_edge", SP_OP_SDY_FUNC_DATA_FLOW_EDGE},
    {"sdy.manual_computation", SP_OP_SDY_MANUAL_COMPUTATION},
    {"sdy.mesh", SP_OP_SDY_MESH},
    {"sdy.named_computation", SP_OP_SDY_NAMED_COMPUTATION},
    {"sdy.propagation_barrier", SP_OP_SDY_PROPAGATION_BARRIER},
    {"sdy.reduce_scatter", SP_OP_SDY_REDUCE_SCATTER},
    {"sdy.replicated_to_unreduced", SP_OP_SDY_REPLICATED_TO_UNREDUCED},
    {"sdy.reshard", SP_OP_SDY_RESHARD},
    {"sdy.return", SP_OP_SDY_RETURN},
    {"sdy.sharded_to_unreduced", SP_OP_SDY_SHARDED_TO_UNREDUCED},
    {"sdy.sharding_constraint", SP_OP_SDY_SHARDING_CONSTRAINT},
    {"sdy.sharding_group", SP_OP_SDY_SHARDING_GROUP},
    {"stablehlo.abs", SP_OP_ABS},
    {"stablehlo.add", SP_OP_ADD},
    {"stablehlo.after_all", SP_OP_AFTER_ALL},
    {"stablehlo.all_gather", SP_OP_ALL_GATHER},
    {"stablehlo.all_reduce", SP_OP_ALL_REDUCE},
    {"stablehlo.all_to_all", SP_OP_ALL_TO_ALL},
    {"stablehlo.and", SP_OP_AND},
    {"stablehlo.async_done", SP_OP_ASYNC_DONE},
    {"stablehlo.async_start", SP_OP_ASYNC_START},
    {"stablehlo.atan2", SP_OP_ATAN2},
    {"stablehlo.batch_norm_grad", SP_OP_BATCH_NORM_GRAD},
    {"stablehlo.batch_norm_inference", SP_OP_BATCH_NORM_INFERENCE},
    {"stablehlo.batch_norm_training", SP_OP_BATCH_NORM_TRAINING},
    {"stablehlo.bitcast_convert", SP_OP_BITCAST_CONVERT},
    {"stablehlo.broadcast", SP_OP_BROADCAST},
    {"stablehlo.broadcast_in_dim", SP_OP_BROADCAST_IN_DIM},
    {"stablehlo.case", SP_OP_CASE},
    {"stablehlo.cbrt", SP_OP_CBRT},
    {"stablehlo.ceil", SP_OP_CEIL},
    {"stablehlo.cholesky", SP_OP_CHOLESKY},
    {"stablehlo.clamp", SP_OP_CLAMP},
    {"stablehlo.collective_broadcast", SP_OP_COLLECTIVE_BROADCAST},
    {"stablehlo.collective_permute", SP_OP_COLLECTIVE_PERMUTE},
    {"stablehlo.compare", SP_OP_COMPARE},
    {"stablehlo.complex", SP_OP_COMPLEX},
    {"stablehlo.composite", SP_OP_COMPOSITE},
    {"stablehlo.concatenate", SP_OP_CONCATENATE},
    {"stablehlo.constant", SP_OP_CONSTANT},
    {"stablehlo.convert", SP_OP_CONVERT},
    {"stablehlo.convolution", SP_OP_CONVOLUTION},
    {"stablehlo.cosine", SP_OP_COSINE},
    {"stablehlo.count_leading_zeros", SP_OP_COUNT_LEADING_ZEROS},
    {"stablehlo.create_token", SP_OP_CREATE_TOKEN},
    {"stablehlo.custom_call", SP_OP_CUSTOM_CALL},
    {"stablehlo.divide", SP_OP_DIVIDE},
    {"stablehlo.dot", SP_OP_DOT},
    {"stablehlo.dot_general", SP_OP_DOT_GENERAL},
    {"stablehlo.dynamic_broadcast_in_dim", SP_OP_DYNAMIC_BROADCAST_IN_DIM},
    {"stablehlo.dynamic_conv", SP_OP_DYNAMIC_CONV},
    {"stablehlo.dynamic_gather", SP_OP_DYNAMIC_GATHER},
    {"stablehlo.dynamic_iota", SP_OP_DYNAMIC_IOTA},
    {"stablehlo.dynamic_pad", SP_OP_DYNAMIC_PAD},
    {"stablehlo.dynamic_reshape", SP_OP_DYNAMIC_RESHAPE},
    {"stablehlo.dynamic_slice", SP_OP_DYNAMIC_SLICE},
    {"stablehlo.dynamic_update_slice", SP_OP_DYNAMIC_UPDATE_SLICE},
    {"stablehlo.einsum", SP_OP_EINSUM},
    {"stablehlo.exponential", SP_OP_EXPONENTIAL},
    {"stablehlo.exponential_minus_one", SP_OP_EXPONENTIAL_MINUS_ONE},
    {"stablehlo.fft", SP_OP_FFT},
    {"stablehlo.floor", SP_OP_FLOOR},
    {"stablehlo.gather", SP_OP_GATHER},
    {"stablehlo.get_dimension_size", SP_OP_GET_DIMENSION_SIZE},
    {"stablehlo.get_tuple_element", SP_OP_GET_TUPLE_ELEMENT},
    {"stablehlo.if", SP_OP_IF},
    {"stablehlo.imag", SP_OP_IMAG},
    {"stablehlo.infeed", SP_OP_INFEED},
    {"stablehlo.iota", SP_OP_IOTA},
    {"stablehlo.is_finite", SP_OP_IS_FINITE},
    {"stablehlo.log", SP_OP_LOG},
    {"stablehlo.log_plus_one", SP_OP_LOG_PLUS_ONE},
    {"stablehlo.logistic", SP_OP_LOGISTIC},
    {"stablehlo.map", SP_OP_MAP},
    {"stablehlo.maximum", SP_OP_MAXIMUM},
    {"stablehlo.minimum", SP_OP_MINIMUM},
    {"stablehlo.multiply", SP_OP_MULTIPLY},
    {"stablehlo.negate", SP_OP_NEGATE},
    {"stablehlo.not", SP_OP_NOT},
    {"stablehlo.optimization_barrier", SP_OP_OPTIMIZATION_BARRIER},
    {"stablehlo.or", SP_OP_OR},
    {"stablehlo.outfeed", SP_OP_OUTFEED},
    {"stablehlo.pad", SP_OP_PAD},
    {"stablehlo.partition_id", SP_OP_PARTITION_ID},
    {"stablehlo.popcnt", SP_OP_POPCNT},
    {"stablehlo.power", SP_OP_POWER},
    {"stablehlo.real", SP_OP_REAL},
    {"stablehlo.real_dynamic_slice", SP_OP_REAL_DYNAMIC_SLICE},
    {"stablehlo.recv", SP_OP_RECV},
    {"stablehlo.reduce", SP_OP_REDUCE},
    {"stablehlo.reduce_precision", SP_OP_REDUCE_PRECISION},
    {"stablehlo.reduce_scatter", SP_OP_REDUCE_SCATTER},
    {"stablehlo.reduce_window", SP_OP_REDUCE_WINDOW},
    {"stablehlo.remainder", SP_OP_REMAINDER},
    {"stablehlo.replica_id", SP_OP_REPLICA_ID},
    {"stablehlo.reshape", SP_OP_RESHAPE},
    {"stablehlo.return", SP_OP_RETURN},
    {"stablehlo.reverse", SP_OP_REVERSE},
    {"stablehlo.rng", SP_OP_RNG},
    {"stablehlo.rng_bit_generator", SP_OP_RNG_BIT_GENERATOR},
    {"stablehlo.round_nearest_afz", SP_OP_ROUND_NEAREST_AFZ},
    {"stablehlo.round_nearest_even", SP_OP_ROUND_NEAREST_EVEN},
    {"stablehlo.rsqrt", SP_OP_RSQRT},
    {"stablehlo.scatter", SP_OP_SCATTER},
    {"stablehlo.select", SP_OP_SELECT},
    {"stablehlo.select_and_scatter", SP_OP_SELECT_AND_SCATTER},
    {"stablehlo.send", SP_OP_SEND},
    {"stablehlo.set_dimension_size", SP_OP_SET_DIMENSION_SIZE},
    {"stablehlo.shift_left", SP_OP_SHIFT_LEFT},
    {"stablehlo.shift_right_arithmetic", SP_OP_SHIFT_RIGHT_ARITHMETIC},
    {"stablehlo.shift_right_logical", SP_OP_SHIFT_RIGHT_LOGICAL},
    {"stablehlo.sign", SP_OP_SIGN},
    {"stablehlo.sine", SP_OP_SINE},
    {"stablehlo.slice", SP_OP_SLICE},
    {"stablehlo.sort", SP_OP_SORT},
    {"stablehlo.sqrt", SP_OP_SQRT},
    {"stablehlo.subtract", SP_OP_SUBTRACT},
    {"stablehlo.tan", SP_OP_TAN},
    {"stablehlo.tanh", SP_OP_TANH},
    {"stablehlo.torch_index_select", SP_OP_TORCH_INDEX_SELECT},
    {"stablehlo.transpose", SP_OP_TRANSPOSE},
    {"stablehlo.triangular_solve", SP_OP_TRIANGULAR_SOLVE},
    {"stablehlo.tuple", SP_OP_TUPLE},
    {"stablehlo.unary_einsum", SP_OP_UNARY_EINSUM},
    {"stablehlo.uniform_dequantize", SP_OP_UNIFORM_DEQUANTIZE},
    {"stablehlo.uniform_quantize", SP_OP_UNIFORM_QUANTIZE},
    {"stablehlo.while", SP_OP_WHILE},
    {"stablehlo.xor", SP_OP_XOR},
};

static const char *const names[SP_OP_COUNT_] = {
    [SP_OP_UNKNOWN] = NULL,
#define SP_OP_NAME_(e, n, t) [e] = n,
    SP_OP_LIST(SP_OP_NAME_)
#undef SP_OP_NAME_
};

static sp_op_kind kind_by_name(const char *name, size_t len)
{
    size_t lo = 0, hi = sizeof by_name / sizeof by_name[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *s = by_name[mid].name;
        int c = strncmp(s, name, len);
        if (c == 0 && s[len] != '\0') {
            c = 1;
        }
        if (c == 0) {
            return by_name[mid].kind;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return SP_OP_UNKNOWN;
}

sp_op_kind sp_op_kind_of(const char *name, size_t len)
{
    sp_op_kind k = kind_by_name(name, len);
    /* MHLO's ops are StableHLO's under another prefix (XLA's round-trip
     * tests write them): mhlo.add is stablehlo.add */
    char full[64];
    if (k == SP_OP_UNKNOWN && len > 5 && len < sizeof full - 5 && memcmp(name, "mhlo.", 5) == 0) {
        memcpy(full, "stablehlo.", 10);
        memcpy(full + 10, name + 5, len - 5);
        k = kind_by_name(full, len + 5);
    }
    return k;
}

const char *sp_op_kind_name(sp_op_kind kind)
{
    if ((unsigned)kind >= (unsigned)SP_OP_COUNT_) {
        return NULL;
    }
    return names[kind];
}

/* The trait column of SP_OP_LIST, indexed by kind. */
static const uint8_t traits[SP_OP_COUNT_] = {
    [SP_OP_UNKNOWN] = 0,
#define SP_OP_TRAITS_(e, n, t) [e] = (uint8_t)(t),
    SP_OP_LIST(SP_OP_TRAITS_)
#undef SP_OP_TRAITS_
};

unsigned sp_op_traits(sp_op_kind kind)
{
    return (unsigned)kind < (unsigned)SP_OP_COUNT_ ? traits[kind] : 0u;
}

bool sp_op_is_elementwise(sp_op_kind kind)
{
    return (sp_op_traits(kind) & SP_OPT_EW) != 0;
}

bool sp_op_is_collective(sp_op_kind kind)
{
    return (sp_op_traits(kind) & SP_OPT_COLL) != 0;
}

bool sp_op_is_sdy_collective(sp_op_kind kind)
{
    return (sp_op_traits(kind) & SP_OPT_SDY_COLL) != 0;
}

bool sp_op_is_data_flow(sp_op_kind kind)
{
    return (sp_op_traits(kind) & SP_OPT_DATA_FLOW) != 0;
}

bool sp_op_has_sharding_attr(sp_op_kind kind)
{
    return (sp_op_traits(kind) & SP_OPT_SHARDING_ATTR) != 0;
}

bool sp_op_constrains_operands(sp_op_kind kind)
{
    return (sp_op_traits(kind) & SP_OPT_CONSTRAINS) != 0;
}
