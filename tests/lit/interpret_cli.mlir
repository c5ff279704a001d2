// `shardplan interpret` (docs/interpret.md): results printed in the
// reference interpreter's layout, checks that hold, a failed check's report
// and exit status, a run_parallel over two partitions, --args.
// RUN: not shardplan interpret %s --split-input-file 2>/dev/null | FileCheck %s
// RUN: not shardplan interpret %s --split-input-file 2>&1 | FileCheck %s --check-prefix=FAILED
// RUN: printf 'func.func @main(%%a: tensor<2xi32>) -> tensor<2xi32> {\n  %%0 = stablehlo.add %%a, %%a : tensor<2xi32>\n  func.return %%0 : tensor<2xi32>\n}\n' > %t.mlir
// RUN: shardplan interpret %t.mlir --args="[dense<[1, 2]> : tensor<2xi32>]" | FileCheck %s --check-prefix=ARGS
// RUN: not shardplan interpret %t.mlir 2>&1 | FileCheck %s --check-prefix=NOARGS
// RUN: not shardplan interpret %t.mlir --args="[4.0 : f32]" 2>&1 | FileCheck %s --check-prefix=NOTDENSE
// ARGS:      tensor<2xi32> {
// ARGS-NEXT:   [2, 4]
// ARGS-NEXT: }
// NOARGS: 1:1: error: func.func: an entry function that takes arguments cannot be interpreted without them
// NOTDENSE: expected dense elements attribute for args elements

// CHECK:      tensor<2x2xf32> {
// CHECK-NEXT:   [
// CHECK-NEXT:     [1.000000e+00, 2.000000e+00],
// CHECK-NEXT:     [3.000000e+00, 4.000000e+00]
// CHECK-NEXT:   ]
// CHECK-NEXT: }
func.func @results() -> tensor<2x2xf32> {
  %0 = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}

// -----

func.func @holds() {
  %0 = stablehlo.iota dim = 0 : tensor<4xi32>
  %1 = stablehlo.constant dense<2> : tensor<4xi32>
  %2 = stablehlo.multiply %0, %1 : tensor<4xi32>
  check.expect_eq_const %2, dense<[0, 2, 4, 6]> : tensor<4xi32>
  func.return
}

// -----

// FAILED: 42:3: check.expect_eq_const failed: element 0: got 1, expected 2
func.func @fails() {
  %0 = stablehlo.constant dense<1> : tensor<i64>
  check.expect_eq_const %0, dense<2> : tensor<i64>
  func.return
}

// -----

// CHECK: tensor<ui32> {1}
func.func @part(%x: tensor<2xi32>) -> (tensor<2xi32>, tensor<ui32>) {
  %id = stablehlo.partition_id : tensor<ui32>
  %s = "stablehlo.all_gather"(%x) <{all_gather_dim = 0 : i64,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
      replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}>
      : (tensor<2xi32>) -> tensor<4xi32>
  %t = stablehlo.slice %s [1:3] : (tensor<4xi32>) -> tensor<2xi32>
  func.return %t, %id : tensor<2xi32>, tensor<ui32>
}
func.func @main() -> tensor<ui32> {
  %a = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %b = stablehlo.constant dense<[3, 4]> : tensor<2xi32>
  %r:4 = "interpreter.run_parallel"(%a, %b) {programs = [[@part, @part]]}
      : (tensor<2xi32>, tensor<2xi32>) -> (tensor<2xi32>, tensor<ui32>, tensor<2xi32>, tensor<ui32>)
  check.expect_eq_const %r#0, dense<[2, 3]> : tensor<2xi32>
  check.expect_eq %r#0, %r#2 : tensor<2xi32>
  func.return %r#3 : tensor<ui32>
}
