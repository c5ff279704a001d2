// RUN: shardplan opt %s -split-input-file -verify-diagnostics
// Issue 18: inputs that crashed the planner or were planned although invalid;
// the verifier rejects each with its location, before any pass.

// expected-error @below {{axis size must be at least 1, got: 0}}
// expected-error @below {{failed to parse Sdy_Mesh parameter 'axes'}}
sdy.mesh @mesh = <["m"=0]>
func.func @zero_axis(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"m"}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

sdy.mesh @mesh = <["m"=2]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"m"}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>
  // expected-error @+1 {{'func.return' op has 2 operands, but enclosing function (@main) returns 1}}
  return %0, %arg0 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

func.func @negative_dim(%arg0: tensor<-8x16xf32>) -> tensor<-8x16xf32> {
  // expected-error @+1 {{invalid tensor type 'tensor<-8x16xf32>': dimension sizes must be non-negative integers or '?'}}
  %0 = stablehlo.add %arg0, %arg0 : tensor<-8x16xf32>
  return %0 : tensor<-8x16xf32>
}

// -----

func.func @elements_overflow(%arg0: tensor<4611686018427387904x4611686018427387904xf32>) -> tensor<4611686018427387904x4611686018427387904xf32> {
  // expected-error @+1 {{has more elements (or bytes) than fit in 64 bits}}
  %0 = stablehlo.add %arg0, %arg0 : tensor<4611686018427387904x4611686018427387904xf32>
  return %0 : tensor<4611686018427387904x4611686018427387904xf32>
}

// -----

func.func @dot_general_result(%arg0: tensor<8x1024xf32>, %arg1: tensor<1024x1024xf32>) -> tensor<8x512xf32> {
  // expected-error @+1 {{'stablehlo.dot_general' op inferred shape '8x1024' is incompatible with result 0 of type 'tensor<8x512xf32>'}}
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x512xf32>
  return %0 : tensor<8x512xf32>
}

// -----

func.func @transpose_result(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'stablehlo.transpose' op inferred shape '8x4' is incompatible}}
  %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
