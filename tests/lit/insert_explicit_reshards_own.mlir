// RUN: shardplan opt %s -sdy-insert-explicit-reshards='enable-full-version=true' | FileCheck %s
// RUN: shardplan opt %S/../../examples/flax_mlp.mlir -sdy-propagation-pipeline -sdy-insert-explicit-reshards='enable-full-version=true' | FileCheck %s --check-prefix=FLAX

// Our own cases for -sdy-insert-explicit-reshards beyond Shardy's dot tests:
// element-wise ops, reductions, reshapes, transposes, data-flow ops, function
// results, and the Flax MLP after propagation (y @ W2 with W2 sharded on its
// contracting dimension needs an all-reduce over "model"). As in Shardy, a
// function result without a sharding is fully replicated, so a sharded value
// returned there is resharded to replicated first; reshards for data-flow
// operands go right after the operand's definition.

sdy.mesh @mesh = <["x"=4, "y"=2]>

// Operands of an element-wise op sharded differently: the one that disagrees
// with the factor sharding the others share is resharded; the op is unchanged.
// CHECK-LABEL: func @add_operand_mismatch
func.func @add_operand_mismatch(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  // CHECK-NEXT: %[[R:.*]] = sdy.reshard %arg1 <@mesh, [{"x"}, {}]> : tensor<8x16xf32>
  // CHECK-NEXT: %[[ADD:.*]] = stablehlo.add %arg0, %[[R]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>}
  // CHECK-NEXT: return %[[ADD]]
  %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Three operands, one odd one out.
// CHECK-LABEL: func @clamp_one_operand_differs
func.func @clamp_one_operand_differs(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}, %arg2: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  // CHECK-NEXT: %[[R:.*]] = sdy.reshard %arg1 <@mesh, [{"x"}, {}]>
  // CHECK-NEXT: %[[C:.*]] = stablehlo.clamp %arg0, %[[R]], %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>}
  // CHECK-NEXT: %[[A:.*]] = stablehlo.add %[[C]], %[[C]]
  // CHECK-NEXT: %[[A_REP:.*]] = sdy.reshard %[[A]] <@mesh, [{}, {}]>
  // CHECK-NEXT: return %[[A_REP]]
  %0 = stablehlo.clamp %arg0, %arg1, %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x16xf32>
  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Same axes, one dimension open and one closed: compatible, nothing inserted.
// CHECK-LABEL: func @add_compatible_open_and_closed
func.func @add_compatible_open_and_closed(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  // CHECK-NEXT: %[[ADD:.*]] = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {?}]>]>}
  // CHECK-NEXT: %[[ADD_REP:.*]] = sdy.reshard %[[ADD]] <@mesh, [{}, {}]>
  // CHECK-NEXT: return %[[ADD_REP]]
  %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {?}]>]>} : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Reducing a dimension sharded on "x": each shard reduces its part, then the
// partial results are all-reduced over "x".
// CHECK-LABEL: func @reduce_over_sharded_dim
func.func @reduce_over_sharded_dim(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<16xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<f32>
  // CHECK:      %[[RED:.*]] = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}]>]>}
  // CHECK-NEXT: %[[AR:.*]] = sdy.all_reduce {"x"} %[[RED]] out_sharding=<@mesh, [{"y"}]> : tensor<16xf32>
  // CHECK-NEXT: %[[AR_REP:.*]] = sdy.reshard %[[AR]] <@mesh, [{}]>
  // CHECK-NEXT: return %[[AR_REP]]
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}]>]>} : (tensor<8x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// A unary op reshards one side only, keeping the more sharded one: here the
// operand (local 32 elements) over the result (local 64).
// CHECK-LABEL: func @reshape_keeps_more_sharded_side
func.func @reshape_keeps_more_sharded_side(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<128xf32> {
  // CHECK-NEXT: %[[RS:.*]] = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>}
  // CHECK-NEXT: %[[R:.*]] = sdy.reshard %[[RS]] <@mesh, [{"y"}]> : tensor<128xf32>
  // CHECK-NEXT: %[[R_REP:.*]] = sdy.reshard %[[R]] <@mesh, [{}]>
  // CHECK-NEXT: return %[[R_REP]]
  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}]>]>} : (tensor<8x16xf32>) -> tensor<128xf32>
  return %0 : tensor<128xf32>
}

// [{"x"}, {"y"}] on 8x16 and [{"x", "y"}] on 128 place data differently (the
// second splits only the 8-row factor): the operand is resharded.
// CHECK-LABEL: func @reshape_merged_axes
func.func @reshape_merged_axes(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<128xf32> {
  // CHECK-NEXT: %[[R:.*]] = sdy.reshard %arg0 <@mesh, [{"x", "y"}, {}]> : tensor<8x16xf32>
  // CHECK-NEXT: stablehlo.reshape %[[R]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", "y"}]>]>}
  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", "y"}]>]>} : (tensor<8x16xf32>) -> tensor<128xf32>
  return %0 : tensor<128xf32>
}

// A reshape whose shardings already agree on every factor is left alone.
// CHECK-LABEL: func @reshape_compatible
func.func @reshape_compatible(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<128xf32> {
  // CHECK-NEXT: %[[RS:.*]] = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>}
  // CHECK-NEXT: %[[RS_REP:.*]] = sdy.reshard %[[RS]] <@mesh, [{}]>
  // CHECK-NEXT: return %[[RS_REP]]
  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : (tensor<8x16xf32>) -> tensor<128xf32>
  return %0 : tensor<128xf32>
}

// Equally sized and sharded sides of a transpose: as in Shardy's
// findCommonAxesOnUnaryOperation the first (the operand) keeps its sharding
// and the result is resharded back.
// CHECK-LABEL: func @transpose_mismatch
func.func @transpose_mismatch(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<16x8xf32> {
  // CHECK-NEXT: %[[T:.*]] = stablehlo.transpose %arg0, dims = [1, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>}
  // CHECK-NEXT: %[[R:.*]] = sdy.reshard %[[T]] <@mesh, [{"x"}, {}]> : tensor<16x8xf32>
  // CHECK-NEXT: %[[R_REP:.*]] = sdy.reshard %[[R]] <@mesh, [{}, {}]>
  // CHECK-NEXT: return %[[R_REP]]
  %0 = stablehlo.transpose %arg0, dims = [1, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// A returned value sharded unlike the function result is resharded first.
// CHECK-LABEL: func @func_result_mismatch
func.func @func_result_mismatch(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) {
  // CHECK-NEXT: %[[N:.*]] = stablehlo.negate %arg0
  // CHECK-NEXT: %[[R:.*]] = sdy.reshard %[[N]] <@mesh, [{}, {"y"}]>
  // CHECK-NEXT: return %[[R]]
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// A dot whose result feeds an element-wise op: the op sees the value after
// the all-reduce and the reshard, not the dot's partial result.
// CHECK-LABEL: func @dot_then_add
func.func @dot_then_add(%arg0: tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x16xf32> {
  // CHECK-NEXT: %[[DOT:.*]] = stablehlo.dot %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>}
  // CHECK-NEXT: %[[AR:.*]] = sdy.all_reduce {"y"} %[[DOT]] out_sharding=<@mesh, [{"x"}, {}]>
  // CHECK-NEXT: %[[R:.*]] = sdy.reshard %[[AR]] <@mesh, [{"x"}, {"y"}]>
  // CHECK-NEXT: %[[ADD:.*]] = stablehlo.add %[[R]], %[[R]]
  // CHECK-NEXT: %[[ADD_REP:.*]] = sdy.reshard %[[ADD]] <@mesh, [{}, {}]>
  // CHECK-NEXT: return %[[ADD_REP]]
  %0 = stablehlo.dot %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// While: the initial value and the body's yielded value are resharded to the
// while's result sharding; ops in the body see the argument as sharded so.
// CHECK-LABEL: func @while_carried_value
func.func @while_carried_value(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  // CHECK:      %[[INIT:.*]] = sdy.reshard %arg0 <@mesh, [{}, {"y"}]>
  // CHECK:      stablehlo.while(%[[IT:.*]] = %[[INIT]],
  // CHECK:      do {
  // CHECK-NEXT:   %[[IN:.*]] = sdy.reshard %[[IT]] <@mesh, [{"x"}, {}]>
  // CHECK-NEXT:   %[[NEG:.*]] = stablehlo.negate %[[IN]]
  // CHECK-NEXT:   %[[OUT:.*]] = sdy.reshard %[[NEG]] <@mesh, [{}, {"y"}]>
  // CHECK-NEXT:   stablehlo.return %[[OUT]],
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_2 = %c) : tensor<8x16xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}]>, <@mesh, []>]>}
    cond {
    %1 = stablehlo.compare LT, %iterArg_2, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.negate %iterArg {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x16xf32>
    stablehlo.return %1, %iterArg_2 : tensor<8x16xf32>, tensor<i32>
  }
  return %0#0 : tensor<8x16xf32>
}

// The Flax MLP (examples/flax_mlp.mlir) after propagation: in every layer
// y @ W2 contracts a dimension sharded on "model" in both y and W2 (which are
// compatible, so nothing is resharded) and the partial sums are all-reduced
// over "model" right after the dot.
// FLAX-LABEL: func.func public @main(
// FLAX:      %[[Z0:.*]] = stablehlo.dot_general %{{.*}}, %arg1, {{.*}}[{"data"}, {}]>]>}
// FLAX-NEXT: sdy.all_reduce {"model"} %[[Z0]] out_sharding=<@mesh, [{"data"}, {}]>
// FLAX:      %[[Z1:.*]] = stablehlo.dot_general %{{.*}}, %arg3, {{.*}}[{"data"}, {}]>]>}
// FLAX-NEXT: sdy.all_reduce {"model"} %[[Z1]] out_sharding=<@mesh, [{"data"}, {}]>
// FLAX:      %[[Z2:.*]] = stablehlo.dot_general %{{.*}}, %arg5, {{.*}}[{"data"}, {}]>]>}
// FLAX-NEXT: sdy.all_reduce {"model"} %[[Z2]] out_sharding=<@mesh, [{"data"}, {}]>
// FLAX:      %[[Z3:.*]] = stablehlo.dot_general %{{.*}}, %arg7, {{.*}}[{"data"}, {}]>]>}
// FLAX-NEXT: sdy.all_reduce {"model"} %[[Z3]] out_sharding=<@mesh, [{"data"}, {}]>
// FLAX-NOT:  sdy.reshard %arg
