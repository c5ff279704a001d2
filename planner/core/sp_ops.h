/* SPDX-License-Identifier: Apache-2.0
 * planner: the ops Shardplan knows by name. SP_OP_LIST(X) expands X(ENUM, "name")
 * for every StableHLO, sdy and func op; sp_op_kind_of maps names to kinds.
 * Ops outside the list are kept as SP_OP_UNKNOWN and printed generically. */
#ifndef SP_OPS_H
#define SP_OPS_H

#include <stddef.h>
#include <stdint.h>

#define SP_OP_LIST(X) \
    X(SP_OP_ABS, "stablehlo.abs") \
    X(SP_OP_ADD, "stablehlo.add") \
    X(SP_OP_AFTER_ALL, "stablehlo.after_all") \
    X(SP_OP_ALL_GATHER, "stablehlo.all_gather") \
    X(SP_OP_ALL_REDUCE, "stablehlo.all_reduce") \
    X(SP_OP_ALL_TO_ALL, "stablehlo.all_to_all") \
    X(SP_OP_AND, "stablehlo.and") \
    X(SP_OP_ASYNC_DONE, "stablehlo.async_done") \
    X(SP_OP_ASYNC_START, "stablehlo.async_start") \
    X(SP_OP_ATAN2, "stablehlo.atan2") \
    X(SP_OP_BATCH_NORM_GRAD, "stablehlo.batch_norm_grad") \
    X(SP_OP_BATCH_NORM_INFERENCE, "stablehlo.batch_norm_inference") \
    X(SP_OP_BATCH_NORM_TRAINING, "stablehlo.batch_norm_training") \
    X(SP_OP_BITCAST_CONVERT, "stablehlo.bitcast_convert") \
    X(SP_OP_BROADCAST, "stablehlo.broadcast") \
    X(SP_OP_BROADCAST_IN_DIM, "stablehlo.broadcast_in_dim") \
    X(SP_OP_CASE, "stablehlo.case") \
    X(SP_OP_CBRT, "stablehlo.cbrt") \
    X(SP_OP_CEIL, "stablehlo.ceil") \
    X(SP_OP_CHOLESKY, "stablehlo.cholesky") \
    X(SP_OP_CLAMP, "stablehlo.clamp") \
    X(SP_OP_COLLECTIVE_BROADCAST, "stablehlo.collective_broadcast") \
    X(SP_OP_COLLECTIVE_PERMUTE, "stablehlo.collective_permute") \
    X(SP_OP_COMPARE, "stablehlo.compare") \
    X(SP_OP_COMPLEX, "stablehlo.complex") \
    X(SP_OP_COMPOSITE, "stablehlo.composite") \
    X(SP_OP_CONCATENATE, "stablehlo.concatenate") \
    X(SP_OP_CONSTANT, "stablehlo.constant") \
    X(SP_OP_CONVERT, "stablehlo.convert") \
    X(SP_OP_CONVOLUTION, "stablehlo.convolution") \
    X(SP_OP_COSINE, "stablehlo.cosine") \
    X(SP_OP_COUNT_LEADING_ZEROS, "stablehlo.count_leading_zeros") \
    X(SP_OP_CREATE_TOKEN, "stablehlo.create_token") \
    X(SP_OP_CUSTOM_CALL, "stablehlo.custom_call") \
    X(SP_OP_DIVIDE, "stablehlo.divide") \
    X(SP_OP_DOT, "stablehlo.dot") \
    X(SP_OP_DOT_GENERAL, "stablehlo.dot_general") \
    X(SP_OP_DYNAMIC_BROADCAST_IN_DIM, "stablehlo.dynamic_broadcast_in_dim") \
    X(SP_OP_DYNAMIC_CONV, "stablehlo.dynamic_conv") \
    X(SP_OP_DYNAMIC_GATHER, "stablehlo.dynamic_gather") \
    X(SP_OP_DYNAMIC_IOTA, "stablehlo.dynamic_iota") \
    X(SP_OP_DYNAMIC_PAD, "stablehlo.dynamic_pad") \
    X(SP_OP_DYNAMIC_RESHAPE, "stablehlo.dynamic_reshape") \
    X(SP_OP_DYNAMIC_SLICE, "stablehlo.dynamic_slice") \
    X(SP_OP_DYNAMIC_UPDATE_SLICE, "stablehlo.dynamic_update_slice") \
    X(SP_OP_EINSUM, "stablehlo.einsum") \
    X(SP_OP_EXPONENTIAL, "stablehlo.exponential") \
    X(SP_OP_EXPONENTIAL_MINUS_ONE, "stablehlo.exponential_minus_one") \
    X(SP_OP_FFT, "stablehlo.fft") \
    X(SP_OP_FLOOR, "stablehlo.floor") \
    X(SP_OP_GATHER, "stablehlo.gather") \
    X(SP_OP_GET_DIMENSION_SIZE, "stablehlo.get_dimension_size") \
    X(SP_OP_GET_TUPLE_ELEMENT, "stablehlo.get_tuple_element") \
    X(SP_OP_IF, "stablehlo.if") \
    X(SP_OP_IMAG, "stablehlo.imag") \
    X(SP_OP_INFEED, "stablehlo.infeed") \
    X(SP_OP_IOTA, "stablehlo.iota") \
    X(SP_OP_IS_FINITE, "stablehlo.is_finite") \
    X(SP_OP_LOG, "stablehlo.log") \
    X(SP_OP_LOG_PLUS_ONE, "stablehlo.log_plus_one") \
    X(SP_OP_LOGISTIC, "stablehlo.logistic") \
    X(SP_OP_MAP, "stablehlo.map") \
    X(SP_OP_MAXIMUM, "stablehlo.maximum") \
    X(SP_OP_MINIMUM, "stablehlo.minimum") \
    X(SP_OP_MULTIPLY, "stablehlo.multiply") \
    X(SP_OP_NEGATE, "stablehlo.negate") \
    X(SP_OP_NOT, "stablehlo.not") \
    X(SP_OP_OPTIMIZATION_BARRIER, "stablehlo.optimization_barrier") \
    X(SP_OP_OR, "stablehlo.or") \
    X(SP_OP_OUTFEED, "stablehlo.outfeed") \
    X(SP_OP_PAD, "stablehlo.pad") \
    X(SP_OP_PARTITION_ID, "stablehlo.partition_id") \
    X(SP_OP_POPCNT, "stablehlo.popcnt") \
    X(SP_OP_POWER, "stablehlo.power") \
    X(SP_OP_REAL, "stablehlo.real") \
    X(SP_OP_REAL_DYNAMIC_SLICE, "stablehlo.real_dynamic_slice") \
    X(SP_OP_RECV, "stablehlo.recv") \
    X(SP_OP_REDUCE, "stablehlo.reduce") \
    X(SP_OP_REDUCE_PRECISION, "stablehlo.reduce_precision") \
    X(SP_OP_REDUCE_SCATTER, "stablehlo.reduce_scatter") \
    X(SP_OP_REDUCE_WINDOW, "stablehlo.reduce_window") \
    X(SP_OP_REMAINDER, "stablehlo.remainder") \
    X(SP_OP_REPLICA_ID, "stablehlo.replica_id") \
    X(SP_OP_RESHAPE, "stablehlo.reshape") \
    X(SP_OP_RETURN, "stablehlo.return") \
    X(SP_OP_REVERSE, "stablehlo.reverse") \
    X(SP_OP_RNG, "stablehlo.rng") \
    X(SP_OP_RNG_BIT_GENERATOR, "stablehlo.rng_bit_generator") \
    X(SP_OP_ROUND_NEAREST_AFZ, "stablehlo.round_nearest_afz") \
    X(SP_OP_ROUND_NEAREST_EVEN, "stablehlo.round_nearest_even") \
    X(SP_OP_RSQRT, "stablehlo.rsqrt") \
    X(SP_OP_SCATTER, "stablehlo.scatter") \
    X(SP_OP_SELECT, "stablehlo.select") \
    X(SP_OP_SELECT_AND_SCATTER, "stablehlo.select_and_scatter") \
    X(SP_OP_SEND, "stablehlo.send") \
    X(SP_OP_SET_DIMENSION_SIZE, "stablehlo.set_dimension_size") \
    X(SP_OP_SHIFT_LEFT, "stablehlo.shift_left") \
    X(SP_OP_SHIFT_RIGHT_ARITHMETIC, "stablehlo.shift_right_arithmetic") \
    X(SP_OP_SHIFT_RIGHT_LOGICAL, "stablehlo.shift_right_logical") \
    X(SP_OP_SIGN, "stablehlo.sign") \
    X(SP_OP_SINE, "stablehlo.sine") \
    X(SP_OP_SLICE, "stablehlo.slice") \
    X(SP_OP_SORT, "stablehlo.sort") \
    X(SP_OP_SQRT, "stablehlo.sqrt") \
    X(SP_OP_SUBTRACT, "stablehlo.subtract") \
    X(SP_OP_TAN, "stablehlo.tan") \
    X(SP_OP_TANH, "stablehlo.tanh") \
    X(SP_OP_TORCH_INDEX_SELECT, "stablehlo.torch_index_select") \
    X(SP_OP_TRANSPOSE, "stablehlo.transpose") \
    X(SP_OP_TRIANGULAR_SOLVE, "stablehlo.triangular_solve") \
    X(SP_OP_TUPLE, "stablehlo.tuple") \
    X(SP_OP_UNARY_EINSUM, "stablehlo.unary_einsum") \
    X(SP_OP_UNIFORM_DEQUANTIZE, "stablehlo.uniform_dequantize") \
    X(SP_OP_UNIFORM_QUANTIZE, "stablehlo.uniform_quantize") \
    X(SP_OP_WHILE, "stablehlo.while") \
    X(SP_OP_XOR, "stablehlo.xor") \
    X(SP_OP_SDY_ALL_GATHER, "sdy.all_gather") \
    X(SP_OP_SDY_ALL_REDUCE, "sdy.all_reduce") \
    X(SP_OP_SDY_ALL_SLICE, "sdy.all_slice") \
    X(SP_OP_SDY_ALL_TO_ALL, "sdy.all_to_all") \
    X(SP_OP_SDY_COLLECTIVE_PERMUTE, "sdy.collective_permute") \
    X(SP_OP_SDY_CONSTANT, "sdy.constant") \
    X(SP_OP_SDY_DATA_FLOW_EDGE, "sdy.data_flow_edge") \
    X(SP_OP_SDY_FUNC_DATA_FLOW_EDGE, "sdy.func_data_flow_edge") \
    X(SP_OP_SDY_MANUAL_COMPUTATION, "sdy.manual_computation") \
    X(SP_OP_SDY_MESH, "sdy.mesh") \
    X(SP_OP_SDY_NAMED_COMPUTATION, "sdy.named_computation") \
    X(SP_OP_SDY_PROPAGATION_BARRIER, "sdy.propagation_barrier") \
    X(SP_OP_SDY_REDUCE_SCATTER, "sdy.reduce_scatter") \
    X(SP_OP_SDY_REPLICATED_TO_UNREDUCED, "sdy.replicated_to_unreduced") \
    X(SP_OP_SDY_RESHARD, "sdy.reshard") \
    X(SP_OP_SDY_RETURN, "sdy.return") \
    X(SP_OP_SDY_SHARDED_TO_UNREDUCED, "sdy.sharded_to_unreduced") \
    X(SP_OP_SDY_SHARDING_CONSTRAINT, "sdy.sharding_constraint") \
    X(SP_OP_SDY_SHARDING_GROUP, "sdy.sharding_group") \
    X(SP_OP_FUNC_FUNC, "func.func") \
    X(SP_OP_FUNC_CALL, "func.call") \
    X(SP_OP_FUNC_RETURN, "func.return")

typedef enum sp_op_kind {
    SP_OP_UNKNOWN = 0,
#define SP_OP_ENUM_(e, n) e,
    SP_OP_LIST(SP_OP_ENUM_)
#undef SP_OP_ENUM_
    SP_OP_COUNT_
} sp_op_kind;

/* Kind of the op named name (len bytes), SP_OP_UNKNOWN when not in the list. */
sp_op_kind sp_op_kind_of(const char *name, size_t len);
/* Canonical name of a kind ("stablehlo.add"); NULL for SP_OP_UNKNOWN. */
const char *sp_op_kind_name(sp_op_kind kind);

/* True for element-wise ops (unary, binary, ternary, compare, select, clamp, convert...). */
int sp_op_is_elementwise(sp_op_kind kind);
/* True for Shardy's explicit collectives and sdy.reshard: the ops
 * partitioning inserts (all_gather, all_slice, all_reduce, all_to_all,
 * collective_permute, reduce_scatter, reshard). */
int sp_op_is_sdy_collective(sp_op_kind kind);

#endif /* SP_OPS_H */
