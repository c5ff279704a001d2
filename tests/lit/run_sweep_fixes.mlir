// Wrong answers the sharded-variant sweep (tests/exec_sweep, make
// exec-sweep) found, through `shardplan run` sharded over 2 and 4 devices and
// compared with the one-device run:
// - a module whose only collectives are the user's sdy.reshard ops is
//   partitioned (it was taken as partitioned already: a dot contracting
//   over a dim the reshards shard was never all-reduced, an op between two
//   reshards ran replicated on sharded operand blocks);
// - a dot contracting over a non-divisible sharded dim reads the padding
//   as zeros;
// - a module given partitioned whose element-wise op is replicated next to
//   a sharded operand is refused, not computed from rows the device lacks;
// - an sdy.all_reduce or reduce_scatter of main's argument (its blocks are
//   copies, not partial sums) is refused, not summed once per device;
// - a scatter whose updates are split along a batching dim that the result
//   is split along too scatters into each device's own batch (it was taken
//   for a partial result: every device but the first started from zeros);
// - a pad along a sharded dim whose edge or interior padding moves elements
//   across blocks reads them from the devices holding them (it was refused),
//   as do a dynamic_update_slice and a dynamic_slice along a sharded dim
//   (start indices clamped as the spec says).
// RUN: split-file %s %t
// RUN: shardplan run %t/dot_pad.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=2, "y"=2/"x"=1, "y"=2/' %t/dot_pad.mlir > %t/dot_pad2.mlir && shardplan run %t/dot_pad2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=2, "y"=2/"x"=1, "y"=4/' %t/dot_pad.mlir > %t/dot_pad4.mlir && shardplan run %t/dot_pad4.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/between.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/between.mlir > %t/between2.mlir && shardplan run %t/between2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/dot_reshard.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/dot_reshard.mlir > %t/dot_reshard2.mlir && shardplan run %t/dot_reshard2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: not shardplan run %t/refused.mlir --iters 1 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: sed 's/"x"=4/"x"=2/' %t/refused.mlir > %t/refused2.mlir && not shardplan run %t/refused2.mlir --iters 1 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: not shardplan run %t/allreduce_arg.mlir --iters 1 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: sed 's/"x"=4/"x"=2/' %t/allreduce_arg.mlir > %t/allreduce_arg2.mlir && not shardplan run %t/allreduce_arg2.mlir --iters 1 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: shardplan run %t/scatter_batch.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/scatter_batch.mlir > %t/scatter_batch2.mlir && shardplan run %t/scatter_batch2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/pad.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/pad.mlir > %t/pad2.mlir && shardplan run %t/pad2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/dynamic.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/"x"=4/"x"=2/' %t/dynamic.mlir > %t/dynamic2.mlir && shardplan run %t/dynamic2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's/dense<3>/dense<7>/; s/dense<4>/dense<-2>/' %t/dynamic.mlir > %t/dynamic_clamp.mlir && shardplan run %t/dynamic_clamp.mlir --iters 1 | FileCheck %s --check-prefix=MATCH

// MATCH: numerics: match
// REFUSED: stablehlo.negate: the operand block does not hold what the result block needs
// WHOLE: sdy.all_reduce of main's argument or a constant: its blocks are copies of one global value, not partial results

//--- dot_pad.mlir
sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%arg0: tensor<3x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>},
                %arg1: tensor<3x5xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>})
    -> (tensor<3x5xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = sdy.reshard %arg0 <@mesh, [{"x"}, {"y"}]> : tensor<3x3xf32>
  %1 = sdy.reshard %arg1 <@mesh, [{"y"}, {}]> : tensor<3x5xf32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<3x3xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %3 = sdy.reshard %2 <@mesh, [{}, {}]> : tensor<3x5xf32>
  return %3 : tensor<3x5xf32>
}

//--- between.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x3xf32>) -> (tensor<8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = sdy.reshard %arg0 <@mesh, [{"x"}, {}]> : tensor<8x3xf32>
  %1 = stablehlo.negate %0 : tensor<8x3xf32>
  %2 = sdy.reshard %1 <@mesh, [{}, {}]> : tensor<8x3xf32>
  return %2 : tensor<8x3xf32>
}

//--- dot_reshard.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x16xf32>, %arg1: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %0 = sdy.reshard %arg0 <@mesh, [{}, {"x"}]> : tensor<8x16xf32>
  %1 = sdy.reshard %arg1 <@mesh, [{"x"}, {}]> : tensor<16x4xf32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}

//--- refused.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x3xf32>) -> (tensor<8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = sdy.all_slice [{"x"}, {}] %arg0 out_sharding=<@mesh, [{"x"}, {}]> : tensor<8x3xf32>
  %1 = stablehlo.negate %0 : tensor<8x3xf32>
  return %1 : tensor<8x3xf32>
}

//--- allreduce_arg.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> tensor<4x4xf32> {
  %0 = sdy.all_reduce {"x"} %arg0 out_sharding=<@mesh, [{}, {}]> : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

//--- scatter_batch.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<4x3x4x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}, {}]>},
                %arg1: tensor<2x4x3x2x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}, {}]>}) -> tensor<4x3x4x2xf32> {
  %idx = stablehlo.constant dense<[[[[0,0],[1,2],[2,1]],[[1,1],[2,0],[0,2]],[[2,2],[0,1],[1,0]],[[0,0],[1,2],[2,1]]],[[[1,1],[2,0],[0,2]],[[2,2],[0,1],[1,0]],[[0,0],[1,2],[2,1]],[[1,1],[2,0],[0,2]]]]> : tensor<2x4x3x2xi64>
  %0 = "stablehlo.scatter"(%arg0, %idx, %arg1) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [3, 4], inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [1], scatter_dims_to_operand_dims = [2, 1], index_vector_dim = 3>} : (tensor<4x3x4x2xf32>, tensor<2x4x3x2xi64>, tensor<2x4x3x2x2xf32>) -> tensor<4x3x4x2xf32>
  return %0 : tensor<4x3x4x2xf32>
}

//--- pad.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<16x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %c = stablehlo.constant dense<7.5> : tensor<f32>
  %0 = stablehlo.pad %arg0, %c, low = [3, 0], high = [-2, 0], interior = [1, 0] : (tensor<8x6xf32>, tensor<f32>) -> tensor<16x6xf32>
  return %0 : tensor<16x6xf32>
}

//--- dynamic.mlir
sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<8x6xf32>, %arg1: tensor<3x6xf32>) -> (tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<3x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %a = sdy.all_slice [{"x"}, {}] %arg0 out_sharding=<@mesh, [{"x"}, {}]> : tensor<8x6xf32>
  %b = sdy.all_slice [{"x"}, {}] %arg1 out_sharding=<@mesh, [{"x"}, {}]> : tensor<3x6xf32>
  %i = stablehlo.constant dense<3> : tensor<i32>
  %j = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_update_slice %a, %b, %i, %j {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x6xf32>, tensor<3x6xf32>, tensor<i32>, tensor<i32>) -> tensor<8x6xf32>
  %k = stablehlo.constant dense<4> : tensor<i32>
  %1 = stablehlo.dynamic_slice %0, %k, %j, sizes = [3, 6] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x6xf32>, tensor<i32>, tensor<i32>) -> tensor<3x6xf32>
  return %0, %1 : tensor<8x6xf32>, tensor<3x6xf32>
}
