// RUN: shardplan opt %s -sdy-populate-op-sharding-rules | FileCheck %s

// Shardplan's own smoke test of -sdy-populate-op-sharding-rules: one function
// per op kind, with shapes chosen so every factor has a distinct size. The
// rule text follows Shardy's conventions: factors are named i, j, k, ... in
// the order Shardy creates them, sizes are listed in name order, and
// contracting or reduced factors are listed under reduction={...}.

// Elementwise ops map every dimension to one factor shared by all operands.
// CHECK-LABEL: func @add_matrix
func.func @add_matrix(%lhs: tensor<4x16xf32>, %rhs: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK: stablehlo.add %arg0, %arg1 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=4, j=16}>}
  %sum = stablehlo.add %lhs, %rhs : tensor<4x16xf32>
  return %sum : tensor<4x16xf32>
}

// A rank-0 op gets an empty rule without a size list.
// CHECK-LABEL: func @add_scalar
func.func @add_scalar(%a: tensor<i32>) -> tensor<i32> {
  // CHECK: {sdy.sharding_rule = #sdy.op_sharding_rule<([], [])->([])>}
  %twice = stablehlo.add %a, %a : tensor<i32>
  return %twice : tensor<i32>
}

// The generic form gets the same rule as the pretty form.
// CHECK-LABEL: func @multiply_generic
func.func @multiply_generic(%a: tensor<3x5x7xbf16>) -> tensor<3x5x7xbf16> {
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k], [i, j, k])->([i, j, k]) {i=3, j=5, k=7}>
  %sq = "stablehlo.multiply"(%a, %a) : (tensor<3x5x7xbf16>, tensor<3x5x7xbf16>) -> tensor<3x5x7xbf16>
  return %sq : tensor<3x5x7xbf16>
}

// A matrix product: the two free dimensions come first, the contracted one
// last, and it is a reduction factor.
// CHECK-LABEL: func @dot_general_matmul
func.func @dot_general_matmul(%x: tensor<16x64xf32>, %w: tensor<64x128xf32>) -> tensor<16x128xf32> {
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=16, j=128, k=64} reduction={k}>
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x64xf32>, tensor<64x128xf32>) -> tensor<16x128xf32>
  return %y : tensor<16x128xf32>
}

// Batched product: batch factor, lhs free, rhs free, then contracted.
// CHECK-LABEL: func @dot_general_batched
func.func @dot_general_batched(%q: tensor<8x16x32xf32>, %k: tensor<8x32x64xf32>) -> tensor<8x16x64xf32> {
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, l], [i, l, k])->([i, j, k]) {i=8, j=16, k=64, l=32} reduction={l}>
  %s = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<8x16x32xf32>, tensor<8x32x64xf32>) -> tensor<8x16x64xf32>
  return %s : tensor<8x16x64xf32>
}

// Transpose: factors follow the result dimensions; the operand lists them in
// its own dimension order.
// CHECK-LABEL: func @transpose_rotate
func.func @transpose_rotate(%a: tensor<2x3x5xf32>) -> tensor<5x2x3xf32> {
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([j, k, i])->([i, j, k]) {i=5, j=2, k=3}>
  %t = stablehlo.transpose %a, dims = [2, 0, 1] : (tensor<2x3x5xf32>) -> tensor<5x2x3xf32>
  return %t : tensor<5x2x3xf32>
}

// Reshape that merges two dimensions into one: the result dimension is the
// compound factor ij.
// CHECK-LABEL: func @reshape_flatten
func.func @reshape_flatten(%a: tensor<4x6xf32>) -> tensor<24xf32> {
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([ij]) {i=4, j=6}>
  %f = stablehlo.reshape %a : (tensor<4x6xf32>) -> tensor<24xf32>
  return %f : tensor<24xf32>
}

// Reshape that splits one dimension into two.
// CHECK-LABEL: func @reshape_unflatten
func.func @reshape_unflatten(%a: tensor<24xf32>) -> tensor<2x12xf32> {
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([ij])->([i, j]) {i=2, j=12}>
  %u = stablehlo.reshape %a : (tensor<24xf32>) -> tensor<2x12xf32>
  return %u : tensor<2x12xf32>
}

// Broadcast: one factor per result dimension; the operand only has the
// dimensions named in dims.
// CHECK-LABEL: func @broadcast_rows
func.func @broadcast_rows(%bias: tensor<16xf32>) -> tensor<4x16xf32> {
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([j])->([i, j]) {i=4, j=16}>
  %b = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
  return %b : tensor<4x16xf32>
}

// Reduce (pretty form): factors follow the operand, the init value is a
// scalar, and the reduced dimension is a reduction factor.
// CHECK-LABEL: func @reduce_sum_rows
func.func @reduce_sum_rows(%a: tensor<6x10xf32>) -> tensor<6xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [])->([i]) {i=6, j=10} reduction={j}>
  %r = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<6x10xf32>, tensor<f32>) -> tensor<6xf32>
  return %r : tensor<6xf32>
}

// Reduce (generic form with an explicit body) over the leading dimension.
// CHECK-LABEL: func @reduce_max_generic
func.func @reduce_max_generic(%a: tensor<16x8xf32>, %init: tensor<f32>) -> tensor<8xf32> {
  // CHECK: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [])->([j]) {i=16, j=8} reduction={i}>
  %m = "stablehlo.reduce"(%a, %init) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %big = "stablehlo.maximum"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "stablehlo.return"(%big) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<16x8xf32>, tensor<f32>) -> tensor<8xf32>
  return %m : tensor<8xf32>
}
