/* SPDX-License-Identifier: Apache-2.0
 * planner: the ops Shardplan knows by name and what kind of op each is.
 * SP_OP_LIST(X) expands X(ENUM, "name", traits) for every StableHLO, sdy and
 * func op and the chlo ops JAX emits; sp_op_kind_of maps names to kinds, and the trait column (a set of
 * SP_OPT_* bits, as Lua's lopcodes.h keeps luaP_opmodes) answers the
 * questions rules, cost, documents and the executor ask of a kind through
 * the sp_op_is_* predicates below. Ops outside the list are kept as
 * SP_OP_UNKNOWN, have no traits and are printed generically.
 * Thread contract: read-only tables; every function is pure. */
#ifndef SP_OPS_H
#define SP_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Trait bits of the list's third column. */
#define SP_OPT_EW            0x01u /* element-wise: sp_op_is_elementwise */
#define SP_OPT_COLL          0x02u /* a StableHLO collective: sp_op_is_collective */
#define SP_OPT_SDY_COLL      0x04u /* explicit sdy collective, reshard: sp_op_is_sdy_collective */
#define SP_OPT_DATA_FLOW     0x08u /* results alias region values: sp_op_is_data_flow */
#define SP_OPT_SHARDING_ATTR 0x10u /* sharding is an op attribute: sp_op_has_sharding_attr */
#define SP_OPT_CONSTRAINS    0x20u /* fixes its operands' sharding: sp_op_constrains_operands */

#define SP_OP_LIST(X) \
    X(SP_OP_ABS, "stablehlo.abs", SP_OPT_EW) \
    X(SP_OP_ADD, "stablehlo.add", SP_OPT_EW) \
    X(SP_OP_AFTER_ALL, "stablehlo.after_all", 0) \
    X(SP_OP_ALL_GATHER, "stablehlo.all_gather", SP_OPT_COLL) \
    X(SP_OP_ALL_REDUCE, "stablehlo.all_reduce", SP_OPT_COLL) \
    X(SP_OP_ALL_TO_ALL, "stablehlo.all_to_all", SP_OPT_COLL) \
    X(SP_OP_AND, "stablehlo.and", SP_OPT_EW) \
    X(SP_OP_ASYNC_DONE, "stablehlo.async_done", 0) \
    X(SP_OP_ASYNC_START, "stablehlo.async_start", 0) \
    X(SP_OP_ATAN2, "stablehlo.atan2", SP_OPT_EW) \
    X(SP_OP_BATCH_NORM_GRAD, "stablehlo.batch_norm_grad", 0) \
    X(SP_OP_BATCH_NORM_INFERENCE, "stablehlo.batch_norm_inference", 0) \
    X(SP_OP_BATCH_NORM_TRAINING, "stablehlo.batch_norm_training", 0) \
    X(SP_OP_BITCAST_CONVERT, "stablehlo.bitcast_convert", 0) \
    X(SP_OP_BROADCAST, "stablehlo.broadcast", 0) \
    X(SP_OP_BROADCAST_IN_DIM, "stablehlo.broadcast_in_dim", 0) \
    X(SP_OP_CASE, "stablehlo.case", SP_OPT_DATA_FLOW) \
    X(SP_OP_CBRT, "stablehlo.cbrt", SP_OPT_EW) \
    X(SP_OP_CEIL, "stablehlo.ceil", SP_OPT_EW) \
    X(SP_OP_CHOLESKY, "stablehlo.cholesky", 0) \
    X(SP_OP_CLAMP, "stablehlo.clamp", SP_OPT_EW) \
    X(SP_OP_COLLECTIVE_BROADCAST, "stablehlo.collective_broadcast", SP_OPT_COLL) \
    X(SP_OP_COLLECTIVE_PERMUTE, "stablehlo.collective_permute", SP_OPT_COLL) \
    X(SP_OP_COMPARE, "stablehlo.compare", SP_OPT_EW) \
    X(SP_OP_COMPLEX, "stablehlo.complex", SP_OPT_EW) \
    X(SP_OP_COMPOSITE, "stablehlo.composite", 0) \
    X(SP_OP_CONCATENATE, "stablehlo.concatenate", 0) \
    X(SP_OP_CONSTANT, "stablehlo.constant", 0) \
    X(SP_OP_CONVERT, "stablehlo.convert", SP_OPT_EW) \
    X(SP_OP_CONVOLUTION, "stablehlo.convolution", 0) \
    X(SP_OP_COSINE, "stablehlo.cosine", SP_OPT_EW) \
    X(SP_OP_COUNT_LEADING_ZEROS, "stablehlo.count_leading_zeros", SP_OPT_EW) \
    X(SP_OP_CREATE_TOKEN, "stablehlo.create_token", 0) \
    X(SP_OP_CUSTOM_CALL, "stablehlo.custom_call", 0) \
    X(SP_OP_DIVIDE, "stablehlo.divide", SP_OPT_EW) \
    X(SP_OP_DOT, "stablehlo.dot", 0) \
    X(SP_OP_DOT_GENERAL, "stablehlo.dot_general", 0) \
    X(SP_OP_DYNAMIC_BROADCAST_IN_DIM, "stablehlo.dynamic_broadcast_in_dim", 0) \
    X(SP_OP_DYNAMIC_CONV, "stablehlo.dynamic_conv", 0) \
    X(SP_OP_DYNAMIC_GATHER, "stablehlo.dynamic_gather", 0) \
    X(SP_OP_DYNAMIC_IOTA, "stablehlo.dynamic_iota", 0) \
    X(SP_OP_DYNAMIC_PAD, "stablehlo.dynamic_pad", 0) \
    X(SP_OP_DYNAMIC_RESHAPE, "stablehlo.dynamic_reshape", 0) \
    X(SP_OP_DYNAMIC_SLICE, "stablehlo.dynamic_slice", 0) \
    X(SP_OP_DYNAMIC_UPDATE_SLICE, "stablehlo.dynamic_update_slice", 0) \
    X(SP_OP_EINSUM, "stablehlo.einsum", 0) \
    X(SP_OP_EXPONENTIAL, "stablehlo.exponential", SP_OPT_EW) \
    X(SP_OP_EXPONENTIAL_MINUS_ONE, "stablehlo.exponential_minus_one", SP_OPT_EW) \
    X(SP_OP_FFT, "stablehlo.fft", 0) \
    X(SP_OP_FLOOR, "stablehlo.floor", SP_OPT_EW) \
    X(SP_OP_GATHER, "stablehlo.gather", 0) \
    X(SP_OP_GET_DIMENSION_SIZE, "stablehlo.get_dimension_size", 0) \
    X(SP_OP_GET_TUPLE_ELEMENT, "stablehlo.get_tuple_element", 0) \
    X(SP_OP_IF, "stablehlo.if", SP_OPT_DATA_FLOW) \
    X(SP_OP_IMAG, "stablehlo.imag", SP_OPT_EW) \
    X(SP_OP_INFEED, "stablehlo.infeed", 0) \
    X(SP_OP_IOTA, "stablehlo.iota", 0) \
    X(SP_OP_IS_FINITE, "stablehlo.is_finite", SP_OPT_EW) \
    X(SP_OP_LOG, "stablehlo.log", SP_OPT_EW) \
    X(SP_OP_LOG_PLUS_ONE, "stablehlo.log_plus_one", SP_OPT_EW) \
    X(SP_OP_LOGISTIC, "stablehlo.logistic", SP_OPT_EW) \
    X(SP_OP_MAP, "stablehlo.map", 0) \
    X(SP_OP_MAXIMUM, "stablehlo.maximum", SP_OPT_EW) \
    X(SP_OP_MINIMUM, "stablehlo.minimum", SP_OPT_EW) \
    X(SP_OP_MULTIPLY, "stablehlo.multiply", SP_OPT_EW) \
    X(SP_OP_NEGATE, "stablehlo.negate", SP_OPT_EW) \
    X(SP_OP_NOT, "stablehlo.not", SP_OPT_EW) \
    X(SP_OP_OPTIMIZATION_BARRIER, "stablehlo.optimization_barrier", SP_OPT_DATA_FLOW) \
    X(SP_OP_OR, "stablehlo.or", SP_OPT_EW) \
    X(SP_OP_OUTFEED, "stablehlo.outfeed", 0) \
    X(SP_OP_PAD, "stablehlo.pad", 0) \
    X(SP_OP_PARTITION_ID, "stablehlo.partition_id", 0) \
    X(SP_OP_POPCNT, "stablehlo.popcnt", SP_OPT_EW) \
    X(SP_OP_POWER, "stablehlo.power", SP_OPT_EW) \
    X(SP_OP_REAL, "stablehlo.real", SP_OPT_EW) \
    X(SP_OP_REAL_DYNAMIC_SLICE, "stablehlo.real_dynamic_slice", 0) \
    X(SP_OP_RECV, "stablehlo.recv", 0) \
    X(SP_OP_REDUCE, "stablehlo.reduce", 0) \
    X(SP_OP_REDUCE_PRECISION, "stablehlo.reduce_precision", SP_OPT_EW) \
    X(SP_OP_REDUCE_SCATTER, "stablehlo.reduce_scatter", SP_OPT_COLL) \
    X(SP_OP_REDUCE_WINDOW, "stablehlo.reduce_window", 0) \
    X(SP_OP_REMAINDER, "stablehlo.remainder", SP_OPT_EW) \
    X(SP_OP_REPLICA_ID, "stablehlo.replica_id", 0) \
    X(SP_OP_RESHAPE, "stablehlo.reshape", 0) \
    X(SP_OP_RETURN, "stablehlo.return", 0) \
    X(SP_OP_REVERSE, "stablehlo.reverse", 0) \
    X(SP_OP_RNG, "stablehlo.rng", 0) \
    X(SP_OP_RNG_BIT_GENERATOR, "stablehlo.rng_bit_generator", 0) \
    X(SP_OP_ROUND_NEAREST_AFZ, "stablehlo.round_nearest_afz", SP_OPT_EW) \
    X(SP_OP_ROUND_NEAREST_EVEN, "stablehlo.round_nearest_even", SP_OPT_EW) \
    X(SP_OP_RSQRT, "stablehlo.rsqrt", SP_OPT_EW) \
    X(SP_OP_SCATTER, "stablehlo.scatter", 0) \
    X(SP_OP_SELECT, "stablehlo.select", SP_OPT_EW) \
    X(SP_OP_SELECT_AND_SCATTER, "stablehlo.select_and_scatter", 0) \
    X(SP_OP_SEND, "stablehlo.send", 0) \
    X(SP_OP_SET_DIMENSION_SIZE, "stablehlo.set_dimension_size", 0) \
    X(SP_OP_SHIFT_LEFT, "stablehlo.shift_left", SP_OPT_EW) \
    X(SP_OP_SHIFT_RIGHT_ARITHMETIC, "stablehlo.shift_right_arithmetic", SP_OPT_EW) \
    X(SP_OP_SHIFT_RIGHT_LOGICAL, "stablehlo.shift_right_logical", SP_OPT_EW) \
    X(SP_OP_SIGN, "stablehlo.sign", SP_OPT_EW) \
    X(SP_OP_SINE, "stablehlo.sine", SP_OPT_EW) \
    X(SP_OP_SLICE, "stablehlo.slice", 0) \
    X(SP_OP_SORT, "stablehlo.sort", 0) \
    X(SP_OP_SQRT, "stablehlo.sqrt", SP_OPT_EW) \
    X(SP_OP_SUBTRACT, "stablehlo.subtract", SP_OPT_EW) \
    X(SP_OP_TAN, "stablehlo.tan", SP_OPT_EW) \
    X(SP_OP_TANH, "stablehlo.tanh", SP_OPT_EW) \
    X(SP_OP_TORCH_INDEX_SELECT, "stablehlo.torch_index_select", 0) \
    X(SP_OP_TRANSPOSE, "stablehlo.transpose", 0) \
    X(SP_OP_TRIANGULAR_SOLVE, "stablehlo.triangular_solve", 0) \
    X(SP_OP_TUPLE, "stablehlo.tuple", 0) \
    X(SP_OP_UNARY_EINSUM, "stablehlo.unary_einsum", 0) \
    X(SP_OP_UNIFORM_DEQUANTIZE, "stablehlo.uniform_dequantize", 0) \
    X(SP_OP_UNIFORM_QUANTIZE, "stablehlo.uniform_quantize", 0) \
    X(SP_OP_WHILE, "stablehlo.while", SP_OPT_DATA_FLOW) \
    X(SP_OP_XOR, "stablehlo.xor", SP_OPT_EW) \
    X(SP_OP_SDY_ALL_GATHER, "sdy.all_gather", SP_OPT_SDY_COLL) \
    X(SP_OP_SDY_ALL_REDUCE, "sdy.all_reduce", SP_OPT_SDY_COLL) \
    X(SP_OP_SDY_ALL_SLICE, "sdy.all_slice", SP_OPT_SDY_COLL) \
    X(SP_OP_SDY_ALL_TO_ALL, "sdy.all_to_all", SP_OPT_SDY_COLL) \
    X(SP_OP_SDY_COLLECTIVE_PERMUTE, "sdy.collective_permute", SP_OPT_SDY_COLL) \
    X(SP_OP_SDY_CONSTANT, "sdy.constant", 0) \
    X(SP_OP_SDY_DATA_FLOW_EDGE, "sdy.data_flow_edge", 0) \
    X(SP_OP_SDY_FUNC_DATA_FLOW_EDGE, "sdy.func_data_flow_edge", 0) \
    X(SP_OP_SDY_MANUAL_COMPUTATION, "sdy.manual_computation", SP_OPT_CONSTRAINS) \
    X(SP_OP_SDY_MESH, "sdy.mesh", 0) \
    X(SP_OP_SDY_NAMED_COMPUTATION, "sdy.named_computation", 0) \
    X(SP_OP_SDY_PROPAGATION_BARRIER, "sdy.propagation_barrier", 0) \
    X(SP_OP_SDY_REDUCE_SCATTER, "sdy.reduce_scatter", SP_OPT_SDY_COLL) \
    X(SP_OP_SDY_REPLICATED_TO_UNREDUCED, "sdy.replicated_to_unreduced", 0) \
    X(SP_OP_SDY_RESHARD, "sdy.reshard", SP_OPT_SDY_COLL | SP_OPT_SHARDING_ATTR) \
    X(SP_OP_SDY_RETURN, "sdy.return", 0) \
    X(SP_OP_SDY_SHARDED_TO_UNREDUCED, "sdy.sharded_to_unreduced", 0) \
    X(SP_OP_SDY_SHARDING_CONSTRAINT, "sdy.sharding_constraint", \
      SP_OPT_SHARDING_ATTR | SP_OPT_CONSTRAINS) \
    X(SP_OP_SDY_SHARDING_GROUP, "sdy.sharding_group", 0) \
    /* the chlo ops JAX emits (chlo.top_k has a rule of its own) */ \
    X(SP_OP_CHLO_ACOS, "chlo.acos", SP_OPT_EW) \
    X(SP_OP_CHLO_ACOSH, "chlo.acosh", SP_OPT_EW) \
    X(SP_OP_CHLO_ASIN, "chlo.asin", SP_OPT_EW) \
    X(SP_OP_CHLO_ASINH, "chlo.asinh", SP_OPT_EW) \
    X(SP_OP_CHLO_ATAN, "chlo.atan", SP_OPT_EW) \
    X(SP_OP_CHLO_ATANH, "chlo.atanh", SP_OPT_EW) \
    X(SP_OP_CHLO_BESSEL_I1E, "chlo.bessel_i1e", SP_OPT_EW) \
    X(SP_OP_CHLO_CONJ, "chlo.conj", SP_OPT_EW) \
    X(SP_OP_CHLO_COSH, "chlo.cosh", SP_OPT_EW) \
    X(SP_OP_CHLO_DIGAMMA, "chlo.digamma", SP_OPT_EW) \
    X(SP_OP_CHLO_ERF, "chlo.erf", SP_OPT_EW) \
    X(SP_OP_CHLO_ERF_INV, "chlo.erf_inv", SP_OPT_EW) \
    X(SP_OP_CHLO_ERFC, "chlo.erfc", SP_OPT_EW) \
    X(SP_OP_CHLO_IS_INF, "chlo.is_inf", SP_OPT_EW) \
    X(SP_OP_CHLO_IS_NEG_INF, "chlo.is_neg_inf", SP_OPT_EW) \
    X(SP_OP_CHLO_IS_POS_INF, "chlo.is_pos_inf", SP_OPT_EW) \
    X(SP_OP_CHLO_LGAMMA, "chlo.lgamma", SP_OPT_EW) \
    X(SP_OP_CHLO_MULHI, "chlo.mulhi", SP_OPT_EW) \
    X(SP_OP_CHLO_NEXT_AFTER, "chlo.next_after", SP_OPT_EW) \
    X(SP_OP_CHLO_POLYGAMMA, "chlo.polygamma", SP_OPT_EW) \
    X(SP_OP_CHLO_SINH, "chlo.sinh", SP_OPT_EW) \
    X(SP_OP_CHLO_SQUARE, "chlo.square", SP_OPT_EW) \
    X(SP_OP_CHLO_TAN, "chlo.tan", SP_OPT_EW) \
    X(SP_OP_CHLO_TOP_K, "chlo.top_k", 0) \
    X(SP_OP_CHLO_ZETA, "chlo.zeta", SP_OPT_EW) \
    /* the copy XLA's StableHLO export writes for a reshard */ \
    X(SP_OP_MHLO_COPY, "mhlo.copy", 0) \
    X(SP_OP_FUNC_FUNC, "func.func", 0) \
    X(SP_OP_FUNC_CALL, "func.call", 0) \
    X(SP_OP_FUNC_RETURN, "func.return", 0)

typedef enum sp_op_kind {
    SP_OP_UNKNOWN = 0,
#define SP_OP_ENUM_(e, n, t) e,
    SP_OP_LIST(SP_OP_ENUM_)
#undef SP_OP_ENUM_
    SP_OP_COUNT_
} sp_op_kind;

/* Kind of the op named name (len bytes), SP_OP_UNKNOWN when not in the list;
 * an MHLO op ("mhlo.add") has the kind of its StableHLO twin. */
sp_op_kind sp_op_kind_of(const char *name, size_t len);
/* Canonical name of a kind ("stablehlo.add"); NULL for SP_OP_UNKNOWN. */
const char *sp_op_kind_name(sp_op_kind kind);

/* The SP_OPT_* bits of kind (0 for SP_OP_UNKNOWN and out-of-range kinds). */
unsigned sp_op_traits(sp_op_kind kind);

/* True for element-wise ops: unary, binary and ternary arithmetic, compare,
 * select, clamp, convert and the like (not bitcast_convert, whose element
 * width may change the shape, nor the uniform (de)quantize ops). */
bool sp_op_is_elementwise(sp_op_kind kind);
/* True for StableHLO's cross-device collectives: all_gather, all_reduce,
 * all_to_all, collective_broadcast, collective_permute, reduce_scatter. */
bool sp_op_is_collective(sp_op_kind kind);
/* True for Shardy's explicit collectives and sdy.reshard: the ops
 * partitioning inserts (all_gather, all_slice, all_reduce, all_to_all,
 * collective_permute, reduce_scatter, reshard). */
bool sp_op_is_sdy_collective(sp_op_kind kind);
/* True for the data-flow ops, whose results alias values of their regions or
 * their operands (Shardy's data-flow edges): while, case, if and
 * optimization_barrier. */
bool sp_op_is_data_flow(sp_op_kind kind);
/* True for the ops whose `sharding` attribute is the sharding of their one
 * result rather than an annotation of it: sdy.sharding_constraint and
 * sdy.reshard. */
bool sp_op_has_sharding_attr(sp_op_kind kind);
/* True for the ops that fix the sharding their operands are used with:
 * sdy.sharding_constraint and sdy.manual_computation (its in_shardings), the
 * users Shardy's -sdy-apply-sharding-constraints weighs alike. */
bool sp_op_constrains_operands(sp_op_kind kind);

#endif /* SP_OPS_H */
