// The wrong-answer classes of issue 19 through `shardplan run`, sharded over
// 2 and 4 devices and compared with the one-device run: max, min and
// product reductions over a sharded dim, a non-identity init value, a
// scatter with sharded updates, a slice and a reshape of a sharded dim.
// RUN: split-file %s %t
// RUN: shardplan run %t/maxred.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/maxred.mlir > %t/maxred2.mlir && shardplan run %t/maxred2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/minred.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/minred.mlir > %t/minred2.mlir && shardplan run %t/minred2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/mulred.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/mulred.mlir > %t/mulred2.mlir && shardplan run %t/mulred2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/initred.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/initred.mlir > %t/initred2.mlir && shardplan run %t/initred2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/scatter.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/scatter.mlir > %t/scatter2.mlir && shardplan run %t/scatter2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/slice.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/slice.mlir > %t/slice2.mlir && shardplan run %t/slice2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/reshape.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/reshape.mlir > %t/reshape2.mlir && shardplan run %t/reshape2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH

// MATCH: numerics: match

//--- maxred.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<16xf32> {
  %c = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.maximum across dimensions = [0] : (tensor<8x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

//--- minred.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<16xf32> {
  %c = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.minimum across dimensions = [0] : (tensor<8x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

//--- mulred.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<16xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.multiply across dimensions = [0] : (tensor<8x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

//--- initred.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<16xf32> {
  %c = stablehlo.constant dense<5.0> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<8x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

//--- scatter.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x4xf32> {
  %idx = stablehlo.constant dense<[[0],[1],[2],[3],[4],[5],[6],[7]]> : tensor<8x1xi32>
  %0 = "stablehlo.scatter"(%arg0, %idx, %arg1) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<8x4xf32>, tensor<8x1xi32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

//--- slice.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.slice %arg0 [3:11, 0:8] : (tensor<16x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

//--- reshape.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<6x8xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<8x6xf32>) -> tensor<6x8xf32>
  return %0 : tensor<6x8xf32>
}
