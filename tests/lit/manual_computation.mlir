// RUN: shardplan opt %s -split-input-file -sdy-aggressive-propagate | FileCheck %s

// Free axes cross a manual computation both ways: "model" enters through the
// in_shardings, is seen inside the body without the manual axis "data", and
// leaves through the out_shardings; the manual axis stays where the user put it.
sdy.mesh @mesh = <["data"=2, "model"=2]>

// CHECK-LABEL: func @free_axis_crosses_the_boundary
// CHECK-SAME: -> (tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data", ?}, {"model", ?}]>})
func.func @free_axis_crosses_the_boundary(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}) -> tensor<16x32xf32> {
  // CHECK: sdy.manual_computation(%0) in_shardings=[<@mesh, [{"data"}, {"model", ?}]>] out_shardings=[<@mesh, [{"data"}, {"model", ?}]>] manual_axes={"data"}
  // CHECK-NEXT: stablehlo.negate %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"model", ?}]>]>}
  %0 = stablehlo.abs %arg0 : tensor<16x32xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"data"}, {?}]>] out_shardings=[<@mesh, [{"data"}, {?}]>] manual_axes={"data"} (%arg1: tensor<8x32xf32>) {
    %2 = stablehlo.negate %arg1 : tensor<8x32xf32>
    sdy.return %2 : tensor<8x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %3 = stablehlo.tanh %1 : tensor<16x32xf32>
  return %3 : tensor<16x32xf32>
}

// -----
sdy.mesh @mesh = <["data"=2, "model"=2]>

// A sharding found inside the body goes out to the operand and the result.
// CHECK-LABEL: func @body_sharding_goes_out
func.func @body_sharding_goes_out(%arg0: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // CHECK: stablehlo.abs %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data", ?}, {"model", ?}]>]>}
  // CHECK: in_shardings=[<@mesh, [{"data"}, {"model", ?}]>] out_shardings=[<@mesh, [{"data"}, {"model", ?}]>]
  %0 = stablehlo.abs %arg0 : tensor<16x32xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"data"}, {?}]>] out_shardings=[<@mesh, [{"data"}, {?}]>] manual_axes={"data"} (%arg1: tensor<8x32xf32>) {
    %2 = sdy.sharding_constraint %arg1 <@mesh, [{}, {"model"}]> : tensor<8x32xf32>
    sdy.return %2 : tensor<8x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %1 : tensor<16x32xf32>
}
