// `shardplan run` on modules with check dialect assertions and a main that
// takes no arguments: the checks are evaluated on one device (the
// interpreter), each failure reported at the check op's position; a module
// on a mesh of several devices runs partitioned too, its checks evaluated
// on the assembled values of sharded operands (4 and 2 devices), a wrong
// expected value caught there as well; a check inside a loop body is not
// run partitioned, which is said.
// RUN: split-file %s %t
// RUN: shardplan run %t/pass.mlir | FileCheck %s --check-prefix=PASS
// RUN: not shardplan run %t/fail.mlir 2>&1 | FileCheck %s --check-prefix=FAIL
// RUN: shardplan run %t/pass.mlir --json | FileCheck %s --check-prefix=JSON
// RUN: shardplan run %t/sharded.mlir | FileCheck %s --check-prefix=SH4
// RUN: sed -e 's|"x"=4|"x"=2|' -e 's|num_partitions = 4|num_partitions = 2|' %t/sharded.mlir > %t/sharded2.mlir && shardplan run %t/sharded2.mlir | FileCheck %s --check-prefix=SH2
// RUN: sed 's|49.0, 49.0|49.0, 48.0|' %t/sharded.mlir > %t/sharded_w.mlir && not shardplan run %t/sharded_w.mlir 2>&1 | FileCheck %s --check-prefix=SHW
// RUN: shardplan run %t/sharded.mlir --json | FileCheck %s --check-prefix=SHJSON
// RUN: shardplan run %t/in_loop.mlir | FileCheck %s --check-prefix=LOOP

// PASS: pass.mlir: checks: 3 of 3 held (1 device, interpreter; check ops are not run partitioned)
// FAIL: fail.mlir:{{[0-9]+}}:3: check.expect_eq_const failed: element 2
// FAIL: fail.mlir: checks: 1 of 2 held
// JSON: {"devices":1,"checks":3,"checks_failed":0}
// SH4: sharded.mlir: checks: 3 of 3 held (1 device, interpreter); partitioned on 4 devices: 3 of 3 held
// SH2: sharded2.mlir: checks: 3 of 3 held (1 device, interpreter); partitioned on 2 devices: 3 of 3 held
// SHW: sharded_w.mlir:[[L:[0-9]+]]:5: check.expect_eq_const failed: element 15: got 49, expected 48
// SHW: sharded_w.mlir:[[L]]:5: check.expect_eq_const failed: element 15: got 49, expected 48 [partitioned, 4 devices]
// SHW: checks: 2 of 3 held (1 device, interpreter); partitioned on 4 devices: 2 of 3 held
// SHJSON: {"devices":4,"checks":3,"checks_failed":0,"partitioned_checks":3,"partitioned_checks_failed":0}
// LOOP: in_loop.mlir: checks: 2 of 2 held (1 device, interpreter); not run partitioned: {{[0-9]+}}:7: check.expect_eq_const inside a region, call or manual computation cannot be evaluated on the device workers yet

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
//--- sharded.mlir
module @sharded attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func @main() {
    %i = stablehlo.iota dim = 0 : tensor<8x2xf32>
    %m = stablehlo.multiply %i, %i {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x2xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %r = stablehlo.reduce(%m init: %c) applies stablehlo.add across dimensions = [0] : (tensor<8x2xf32>, tensor<f32>) -> tensor<2xf32>
    check.expect_eq_const %m, dense<[[0.0, 0.0], [1.0, 1.0], [4.0, 4.0], [9.0, 9.0], [16.0, 16.0], [25.0, 25.0], [36.0, 36.0], [49.0, 49.0]]> : tensor<8x2xf32>
    check.expect_almost_eq_const %r, dense<[140.0, 140.0]> : tensor<2xf32>
    check.expect_eq %m, %m : tensor<8x2xf32>
    func.return
  }
}
//--- in_loop.mlir
module @in_loop attributes {mhlo.num_partitions = 2 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func @main() {
    %i = stablehlo.iota dim = 0 : tensor<4xf32>
    %m = stablehlo.multiply %i, %i {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : tensor<4xf32>
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %w:2 = stablehlo.while(%k = %c0, %x = %m) : tensor<i32>, tensor<4xf32>
     cond {
      %p = stablehlo.compare LT, %k, %c1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      check.expect_eq_const %x, dense<[0.0, 1.0, 4.0, 9.0]> : tensor<4xf32>
      %n = stablehlo.add %k, %c1 : tensor<i32>
      stablehlo.return %n, %x : tensor<i32>, tensor<4xf32>
    }
    check.expect_eq_const %w#1, dense<[0.0, 1.0, 4.0, 9.0]> : tensor<4xf32>
    func.return
  }
}
