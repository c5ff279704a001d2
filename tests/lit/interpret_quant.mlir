// Uniform quantized types in `shardplan interpret` (docs/interpret.md), with
// answers worked by hand from the spec's quantize/dequantize: a narrowed
// storage range clamps, per-axis parameters follow their dimension, the
// rounding is to nearest even, a comparison is of the dequantized values
// (storage 100 > 2, but 1.0 < 2.0), and a malformed type is an error.
// RUN: not shardplan interpret %s --split-input-file 2>&1 | FileCheck %s

func.func @clamp_to_storage_range() {
  %x = stablehlo.constant dense<[100.0, -100.0]> : tensor<2xf32>
  %q = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8<-127:127>:f32, 5.000000e-01>>
  %s = stablehlo.bitcast_convert %q : (tensor<2x!quant.uniform<i8<-127:127>:f32, 5.000000e-01>>) -> tensor<2xi8>
  check.expect_eq_const %s, dense<[127, -127]> : tensor<2xi8>
  func.return
}

// -----

func.func @per_axis_dim1() {
  %x = stablehlo.constant dense<1.0> : tensor<2x2xf32>
  %q = stablehlo.uniform_quantize %x : (tensor<2x2xf32>) -> tensor<2x2x!quant.uniform<u8:f32:1, {5.000000e-01:10,2.500000e-01}>>
  %s = stablehlo.bitcast_convert %q : (tensor<2x2x!quant.uniform<u8:f32:1, {5.000000e-01:10,2.500000e-01}>>) -> tensor<2x2xui8>
  check.expect_eq_const %s, dense<[[12, 4], [12, 4]]> : tensor<2x2xui8>
  func.return
}

// -----

func.func @ties_to_even() {
  %x = stablehlo.constant dense<[2.5, 3.5, -2.5]> : tensor<3xf32>
  %q = stablehlo.uniform_quantize %x : (tensor<3xf32>) -> tensor<3x!quant.uniform<i8:f32, 1.000000e+00>>
  %s = stablehlo.bitcast_convert %q : (tensor<3x!quant.uniform<i8:f32, 1.000000e+00>>) -> tensor<3xi8>
  check.expect_eq_const %s, dense<[2, 4, -2]> : tensor<3xi8>
  func.return
}

// -----

func.func @compare_dequantized() {
  %a = stablehlo.constant dense<1.0> : tensor<f32>
  %b = stablehlo.constant dense<2.0> : tensor<f32>
  %qa = stablehlo.uniform_quantize %a : (tensor<f32>) -> tensor<!quant.uniform<i8:f32, 1.000000e-02>>
  %qb = stablehlo.uniform_quantize %b : (tensor<f32>) -> tensor<!quant.uniform<i8:f32, 1.000000e+00>>
  %gt = stablehlo.compare GT, %qa, %qb : (tensor<!quant.uniform<i8:f32, 1.000000e-02>>, tensor<!quant.uniform<i8:f32, 1.000000e+00>>) -> tensor<i1>
  check.expect_eq_const %gt, dense<false> : tensor<i1>
  func.return
}

// -----

// CHECK-NOT: check.expect
// CHECK: [[@LINE+3]]:3: error: stablehlo.uniform_quantize: the element type of tensor<2x!quant.uniform<i8:f32:0, 5.000000e-01>> cannot be interpreted
func.func @axis_without_list() {
  %x = stablehlo.constant dense<1.0> : tensor<2xf32>
  %q = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32:0, 5.000000e-01>>
  func.return
}
