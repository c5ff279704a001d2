// `shardplan run` on modules with check dialect assertions and a main that
// takes no arguments: the checks are evaluated on one device (the
// interpreter), each failure reported at the check op's position.
// RUN: split-file %s %t
// RUN: shardplan run %t/pass.mlir | FileCheck %s --check-prefix=PASS
// RUN: not shardplan run %t/fail.mlir 2>&1 | FileCheck %s --check-prefix=FAIL
// RUN: shardplan run %t/pass.mlir --json | FileCheck %s --check-prefix=JSON

// PASS: pass.mlir: checks: 3 of 3 held (1 device, interpreter; check ops are not run partitioned)
// FAIL: fail.mlir:{{[0-9]+}}:3: check.expect_eq_const failed: element 2
// FAIL: fail.mlir: checks: 1 of 2 held
// JSON: {"devices":1,"checks":3,"checks_failed":0}

//--- pass.mlir
func.func @main() {
  %0 = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %1 = stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>
  %2 = stablehlo.add %0, %0 : tensor<4xf32>
  %c = stablehlo.constant dense<-7> : tensor<i32>
  %3 = stablehlo.reduce(%1 init: %c) applies stablehlo.maximum across dimensions = [0] : (tensor<2x2xi32>, tensor<i32>) -> tensor<2xi32>
  check.expect_almost_eq_const %2, dense<[2.0, 4.0, 6.0, 8.0]> : tensor<4xf32>
  check.expect_eq_const %3, dense<[3, 4]> : tensor<2xi32>
  "stablehlo.custom_call"(%2, %2) {call_target_name = "check.expect_close", has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
  func.return
}
//--- fail.mlir
func.func @main() {
  %0 = stablehlo.constant dense<[1, 2, 3]> : tensor<3xi32>
  %1 = stablehlo.multiply %0, %0 : tensor<3xi32>
  check.expect_eq_const %1, dense<[1, 4, 9]> : tensor<3xi32>
  check.expect_eq_const %1, dense<[1, 4, 10]> : tensor<3xi32>
  func.return
}
