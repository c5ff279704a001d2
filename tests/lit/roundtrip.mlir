// RUN: shardplan opt %s | FileCheck %s
// RUN: shardplan opt %s | shardplan opt - | FileCheck %s
// RUN: shardplan opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: shardplan opt %s -mlir-print-op-generic | shardplan opt - | FileCheck %s

// The reader accepts generic and pretty forms; without passes `opt` prints
// the module back in pretty form, renaming values as MLIR does (%argN for
// arguments, %N for results, %c/%cst for constants). With
// -mlir-print-op-generic every op is printed in generic form, and that output
// reads back to the same pretty text. Inputs mix both forms on purpose.
// Known gaps of the printer are tested in roundtrip_canonical.mlir.

// CHECK: module {
// CHECK-NEXT: sdy.mesh @mesh = <["data"=2, "model"=4]>
// GENERIC: "sdy.mesh"() <{mesh = #sdy.mesh<["data"=2, "model"=4]>, sym_name = "mesh"}> : () -> ()
sdy.mesh @mesh = <["data"=2, "model"=4]>

// CHECK-LABEL: func.func @elementwise(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: %0 = stablehlo.add %arg0, %arg1 : tensor<4x8xf32>
// CHECK-NEXT: %1 = stablehlo.add %0, %arg1 : tensor<4x8xf32>
// CHECK-NEXT: return %1 : tensor<4x8xf32>
// CHECK-NEXT: }
// GENERIC-LABEL: sym_name = "elementwise"
// GENERIC: %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// GENERIC-NEXT: %1 = "stablehlo.add"(%0, %arg1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// GENERIC-NEXT: "func.return"(%1) : (tensor<4x8xf32>) -> ()
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = "stablehlo.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = stablehlo.add %s, %b : tensor<4x8xf32>
  func.return %t : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @dots
// CHECK-NEXT: %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: %1 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: %2 = stablehlo.dot_general %arg2, %arg3, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
// GENERIC-LABEL: sym_name = "dots"
// GENERIC: "stablehlo.dot_general"(%arg0, %arg1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// GENERIC: "stablehlo.dot_general"(%arg0, %arg1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}>
// GENERIC: "stablehlo.dot_general"(%arg2, %arg3) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>}>
func.func @dots(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %p: tensor<2x8x16xf32>, %q: tensor<2x16x4xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<2x8x4xf32>) {
  %0 = "stablehlo.dot_general"(%x, %w) {
    dot_dimension_numbers = #stablehlo.dot<
      lhs_batching_dimensions = [],
      lhs_contracting_dimensions = [1],
      rhs_batching_dimensions = [],
      rhs_contracting_dimensions = [0]
    >
  } : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %2 = stablehlo.dot_general %p, %q, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  return %0, %1, %2 : tensor<8x32xf32>, tensor<8x32xf32>, tensor<2x8x4xf32>
}

// CHECK-LABEL: func.func @shape_ops
// CHECK-NEXT: %0 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<4x16xf32>) -> tensor<16x4xf32>
// CHECK-NEXT: %2 = stablehlo.reshape %1 : (tensor<16x4xf32>) -> tensor<64xf32>
// CHECK-NEXT: %3 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<16xf32>) -> tensor<16x2xf32>
// GENERIC-LABEL: sym_name = "shape_ops"
// GENERIC: "stablehlo.broadcast_in_dim"(%arg0) <{broadcast_dimensions = array<i64: 1>}> : (tensor<16xf32>) -> tensor<4x16xf32>
// GENERIC-NEXT: "stablehlo.transpose"(%0) <{permutation = array<i64: 1, 0>}> : (tensor<4x16xf32>) -> tensor<16x4xf32>
// GENERIC-NEXT: "stablehlo.reshape"(%1) : (tensor<16x4xf32>) -> tensor<64xf32>
func.func @shape_ops(%v: tensor<16xf32>) -> (tensor<64xf32>, tensor<16x2xf32>) {
  %b = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
  %t = "stablehlo.transpose"(%b) {permutation = array<i64: 1, 0>} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %r = stablehlo.reshape %t : (tensor<16x4xf32>) -> tensor<64xf32>
  %c = "stablehlo.broadcast_in_dim"(%v) {broadcast_dimensions = array<i64: 0>} : (tensor<16xf32>) -> tensor<16x2xf32>
  return %r, %c : tensor<64xf32>, tensor<16x2xf32>
}

// CHECK-LABEL: func.func @constants
// CHECK-NEXT: %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %c = stablehlo.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK-NEXT: %cst_0 = stablehlo.constant dense<1.500000e+00> : tensor<2x2xf32>
// GENERIC-LABEL: sym_name = "constants"
// GENERIC: "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
// GENERIC-NEXT: "stablehlo.constant"() <{value = dense<[1, 2, 3]> : tensor<3xi64>}> : () -> tensor<3xi64>
func.func @constants() -> (tensor<f32>, tensor<3xi64>, tensor<2x2xf32>) {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %i = "stablehlo.constant"() {value = dense<[1, 2, 3]> : tensor<3xi64>} : () -> tensor<3xi64>
  %h = stablehlo.constant dense<1.500000e+00> : tensor<2x2xf32>
  return %z, %i, %h : tensor<f32>, tensor<3xi64>, tensor<2x2xf32>
}

// A reduce whose body is one commutative op on the block arguments prints
// in the compact `applies` form, whatever form it was written in.
// CHECK-LABEL: func.func @reduces
// CHECK-NEXT: %0 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: %1 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
// GENERIC-LABEL: sym_name = "reduces"
// GENERIC: "stablehlo.reduce"(%arg0, %arg1) <{dimensions = array<i64: 1>}> ({
// GENERIC-NEXT: ^bb0(%[[A:.*]]: tensor<f32>, %[[B:.*]]: tensor<f32>):
// GENERIC-NEXT: %[[S:.*]] = "stablehlo.add"(%[[A]], %[[B]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// GENERIC-NEXT: "stablehlo.return"(%[[S]]) : (tensor<f32>) -> ()
// GENERIC-NEXT: }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
func.func @reduces(%a: tensor<4x8xf32>, %init: tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
  %0 = stablehlo.reduce(%a init: %init) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = "stablehlo.reduce"(%a, %init) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %m = "stablehlo.maximum"(%l, %r) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "stablehlo.return"(%m) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0, 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  return %0, %1 : tensor<4xf32>, tensor<f32>
}

// Shardings on arguments and results, and sharding constraints.
// CHECK-LABEL: func.func @sharded(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
// CHECK-NEXT: %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %1 = sdy.sharding_constraint %0 <@mesh, [{"data"}, {"model"}]> : tensor<8x16xf32>
// CHECK-NEXT: %2 = sdy.sharding_constraint %1 <@mesh, [{"data", ?}, {?}]> : tensor<8x16xf32>
// CHECK-NEXT: return %2 : tensor<8x16xf32>
// GENERIC-LABEL: sym_name = "sharded"
// GENERIC: "sdy.sharding_constraint"(%0) <{sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
// GENERIC-NEXT: "sdy.sharding_constraint"(%1) <{sharding = #sdy.sharding<@mesh, [{"data", ?}, {?}]>}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
func.func @sharded(%x: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
                   %w: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>})
    -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %c = sdy.sharding_constraint %y <@mesh, [{"data"}, {"model"}]> : tensor<8x16xf32>
  %o = "sdy.sharding_constraint"(%c) {sharding = #sdy.sharding<@mesh, [{"data", ?}, {?}]>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %o : tensor<8x16xf32>
}
// CHECK: }
