// chlo.scan in its custom form (ChloOps.cpp's syntax), run by `shardplan
// interpret`: a reverse scan along dimension 1 with a product carry, the
// results printed as dense attributes (--interpreter-print-dense), and the
// small float types printed as MLIR prints them (a splat when all equal).
// The answers are worked by hand: suffix products of [1, 2, 3] and [4, 5, 6].
// RUN: not shardplan interpret %s --split-input-file --interpreter-print-dense 2>/dev/null | FileCheck %s
// RUN: not shardplan interpret %s --split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=ERR

// CHECK:      dense<{{\[\[}}6, 6, 3], [120, 30, 6]]> : tensor<2x3xi32>
// CHECK-NEXT: dense<[6, 120]> : tensor<2xi32>
func.func @main() -> (tensor<2x3xi32>, tensor<2xi32>) {
  %input = stablehlo.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %init = stablehlo.constant dense<1> : tensor<2xi32>
  %0:2 = chlo.scan(%input) inits (%init) dimension=1 attributes {is_reverse = true} {
  ^bb0(%x: tensor<2xi32>, %carry: tensor<2xi32>):
    %1 = stablehlo.multiply %x, %carry : tensor<2xi32>
    stablehlo.return %1, %1 : tensor<2xi32>, tensor<2xi32>
  } : (tensor<2x3xi32>, tensor<2xi32>) -> (tensor<2x3xi32>, tensor<2xi32>)
  func.return %0#0, %0#1 : tensor<2x3xi32>, tensor<2xi32>
}

// -----

// CHECK:      dense<1.015630e-01> : tensor<2xf8E4M3FN>
// CHECK-NEXT: dense<[4.480000e+02, 0x7F]> : tensor<2xf8E4M3FN>
// CHECK-NEXT: dense<[6.000000e+00, -5.000000e-01]> : tensor<2xf4E2M1FN>
func.func @main() -> (tensor<2xf8E4M3FN>, tensor<2xf8E4M3FN>, tensor<2xf4E2M1FN>) {
  %0 = stablehlo.constant dense<[0.1, 0.1]> : tensor<2xf8E4M3FN>
  %1 = stablehlo.constant dense<[448.0, 1000.0]> : tensor<2xf8E4M3FN>
  %2 = stablehlo.constant dense<[100.0, -0.4]> : tensor<2xf4E2M1FN>
  func.return %0, %1, %2 : tensor<2xf8E4M3FN>, tensor<2xf8E4M3FN>, tensor<2xf4E2M1FN>
}

// -----

// ERR: [[@LINE+3]]:8: error: chlo.scan: not enough result types to cover the required carries
func.func @main() {
  %init = stablehlo.constant dense<0> : tensor<i32>
  %0 = chlo.scan() inits(%init, %init) dimension=0 {
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    stablehlo.return %a, %b : tensor<i32>, tensor<i32>
  } : (tensor<i32>, tensor<i32>) -> tensor<i32>
  func.return
}
