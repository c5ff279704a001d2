// JAX shard_map programs through `shardplan run`: sdy.manual_computation with
// the StableHLO collectives JAX lowers psum, all_gather, psum_scatter,
// all_to_all, ppermute and axis_index to, on meshes 1x4 and 2x2 (manual axes
// all or a subset). Each runs partitioned on the device workers against the
// one-device reference (the interpreter runs the bodies in lockstep), and
// with its CHECKOP line made a check it is compared with the answer worked
// out by hand; a wrong expected answer is caught. jax_combo (psum, ppermute,
// all_gather in one body, as JAX lowers a training step's shard_map) and
// jax_psum_2x2 (pmax over x of a 2x2 mesh, y left free) and jax_ring (a
// ppermute inside a while loop in the body, as a fori_loop ring) run on
// seeded inputs. pmax_select_2x2 reduces with a body of compare and select
// (the interpreter's region evaluator on the workers), bcast_4 is a
// collective_broadcast over the partitions from partition 2.
// RUN: split-file %s %t
// RUN: shardplan run %t/psum.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/psum.mlir > %t/psum_c.mlir && shardplan run %t/psum_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/all_gather.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/all_gather.mlir > %t/all_gather_c.mlir && shardplan run %t/all_gather_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/psum_scatter.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/psum_scatter.mlir > %t/psum_scatter_c.mlir && shardplan run %t/psum_scatter_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/all_to_all.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/all_to_all.mlir > %t/all_to_all_c.mlir && shardplan run %t/all_to_all_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/ppermute.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/ppermute.mlir > %t/ppermute_c.mlir && shardplan run %t/ppermute_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/ppermute_partial.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/ppermute_partial.mlir > %t/ppermute_partial_c.mlir && shardplan run %t/ppermute_partial_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/axis_index.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/axis_index.mlir > %t/axis_index_c.mlir && shardplan run %t/axis_index_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/psum_2x2_x_of_xy_free_y.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/psum_2x2_x_of_xy_free_y.mlir > %t/psum_2x2_x_of_xy_free_y_c.mlir && shardplan run %t/psum_2x2_x_of_xy_free_y_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/psum_2x2_y.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/psum_2x2_y.mlir > %t/psum_2x2_y_c.mlir && shardplan run %t/psum_2x2_y_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/all_gather_2x2_x.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/all_gather_2x2_x.mlir > %t/all_gather_2x2_x_c.mlir && shardplan run %t/all_gather_2x2_x_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/psum_scatter_2x2_x.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/psum_scatter_2x2_x.mlir > %t/psum_scatter_2x2_x_c.mlir && shardplan run %t/psum_scatter_2x2_x_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/all_to_all_2x2_y.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/all_to_all_2x2_y.mlir > %t/all_to_all_2x2_y_c.mlir && shardplan run %t/all_to_all_2x2_y_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/ppermute_2x2_y.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/ppermute_2x2_y.mlir > %t/ppermute_2x2_y_c.mlir && shardplan run %t/ppermute_2x2_y_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/axis_index_2x2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/axis_index_2x2.mlir > %t/axis_index_2x2_c.mlir && shardplan run %t/axis_index_2x2_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/jax_combo.mlir --iters 2 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/jax_psum_2x2.mlir --iters 2 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/jax_ring.mlir --iters 2 | FileCheck %s --check-prefix=MATCH
// RUN: shardplan run %t/pmax_select_2x2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/pmax_select_2x2.mlir > %t/pmax_select_2x2_c.mlir && shardplan run %t/pmax_select_2x2_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: shardplan run %t/bcast_4.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/bcast_4.mlir > %t/bcast_4_c.mlir && shardplan run %t/bcast_4_c.mlir | FileCheck %s --check-prefix=HELD
// RUN: sed -e 's|// CHECKOP: ||' -e 's|24.0, 28.0|24.0, 29.0|' %t/psum.mlir > %t/wrong.mlir && not shardplan run %t/wrong.mlir 2>&1 | FileCheck %s --check-prefix=WRONG

// MATCH: numerics: match
// HELD: checks: 1 of 1 held
// WRONG: wrong.mlir:{{[0-9]+}}:5: check.expect_eq_const failed: element 1: got 28, expected 29
// WRONG: checks: 0 of 1 held
//--- psum.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main() -> (tensor<2x2xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<8x2xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
            ^bb0(%a: tensor<f32>, %b: tensor<f32>):
              %s = stablehlo.add %a, %b : tensor<f32>
              stablehlo.return %s : tensor<f32>
            }) : (tensor<2x2xf32>) -> tensor<2x2xf32>
      sdy.return %r : tensor<2x2xf32>
    } : (tensor<8x2xf32>) -> tensor<2x2xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[24.0, 28.0], [32.0, 36.0]]> : tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
}

//--- all_gather.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main() -> (tensor<2x8xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<8x2xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> : (tensor<2x2xf32>) -> tensor<2x8xf32>
      sdy.return %r : tensor<2x8xf32>
    } : (tensor<8x2xf32>) -> tensor<2x8xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[0.0, 1.0, 4.0, 5.0, 8.0, 9.0, 12.0, 13.0], [2.0, 3.0, 6.0, 7.0, 10.0, 11.0, 14.0, 15.0]]> : tensor<2x8xf32>
    return %0 : tensor<2x8xf32>
  }
}

//--- psum_scatter.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main() -> (tensor<1x8xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<32xf32>
    %arg0 = stablehlo.reshape %i : (tensor<32xf32>) -> tensor<4x8xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {"x"}]>] manual_axes={"x"} (%arg1: tensor<1x8xf32>) {
      %r = "stablehlo.reduce_scatter"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, scatter_dimension = 1 : i64, use_global_device_ids}> ({
            ^bb0(%a: tensor<f32>, %b: tensor<f32>):
              %s = stablehlo.add %a, %b : tensor<f32>
              stablehlo.return %s : tensor<f32>
            }) : (tensor<1x8xf32>) -> tensor<1x2xf32>
      sdy.return %r : tensor<1x2xf32>
    } : (tensor<4x8xf32>) -> tensor<1x8xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[48.0, 52.0, 56.0, 60.0, 64.0, 68.0, 72.0, 76.0]]> : tensor<1x8xf32>
    return %0 : tensor<1x8xf32>
  }
}

//--- all_to_all.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main() -> (tensor<16x2xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<32xf32>
    %arg0 = stablehlo.reshape %i : (tensor<32xf32>) -> tensor<4x8xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<1x8xf32>) {
      %r = "stablehlo.all_to_all"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, split_count = 4 : i64, split_dimension = 1 : i64}> : (tensor<1x8xf32>) -> tensor<4x2xf32>
      sdy.return %r : tensor<4x2xf32>
    } : (tensor<4x8xf32>) -> tensor<16x2xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[0.0, 1.0], [8.0, 9.0], [16.0, 17.0], [24.0, 25.0], [2.0, 3.0], [10.0, 11.0], [18.0, 19.0], [26.0, 27.0], [4.0, 5.0], [12.0, 13.0], [20.0, 21.0], [28.0, 29.0], [6.0, 7.0], [14.0, 15.0], [22.0, 23.0], [30.0, 31.0]]> : tensor<16x2xf32>
    return %0 : tensor<16x2xf32>
  }
}

//--- ppermute.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main() -> (tensor<8x2xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<8x2xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.collective_permute"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : (tensor<2x2xf32>) -> tensor<2x2xf32>
      sdy.return %r : tensor<2x2xf32>
    } : (tensor<8x2xf32>) -> tensor<8x2xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[12.0, 13.0], [14.0, 15.0], [0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0], [8.0, 9.0], [10.0, 11.0]]> : tensor<8x2xf32>
    return %0 : tensor<8x2xf32>
  }
}

//--- ppermute_partial.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main() -> (tensor<8x2xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<8x2xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.collective_permute"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3]]> : tensor<3x2xi64>}> : (tensor<2x2xf32>) -> tensor<2x2xf32>
      sdy.return %r : tensor<2x2xf32>
    } : (tensor<8x2xf32>) -> tensor<8x2xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[0.0, 0.0], [0.0, 0.0], [0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0], [8.0, 9.0], [10.0, 11.0]]> : tensor<8x2xf32>
    return %0 : tensor<8x2xf32>
  }
}

//--- axis_index.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main() -> (tensor<8x2xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<8x2xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<2x2xf32>) {
      %pid = stablehlo.partition_id : tensor<ui32>
      %dv = stablehlo.constant dense<1> : tensor<ui32>
      %md = stablehlo.constant dense<4> : tensor<ui32>
      %q = stablehlo.divide %pid, %dv : tensor<ui32>
      %rm = stablehlo.remainder %q, %md : tensor<ui32>
      %ix = stablehlo.convert %rm : (tensor<ui32>) -> tensor<i32>
      %fx = stablehlo.convert %ix : (tensor<i32>) -> tensor<f32>
      %bx = stablehlo.broadcast_in_dim %fx, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
      %c100 = stablehlo.constant dense<100.0> : tensor<2x2xf32>
      %sc = stablehlo.multiply %bx, %c100 : tensor<2x2xf32>
      %r = stablehlo.add %arg1, %sc : tensor<2x2xf32>
      sdy.return %r : tensor<2x2xf32>
    } : (tensor<8x2xf32>) -> tensor<8x2xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[0.0, 1.0], [2.0, 3.0], [104.0, 105.0], [106.0, 107.0], [208.0, 209.0], [210.0, 211.0], [312.0, 313.0], [314.0, 315.0]]> : tensor<8x2xf32>
    return %0 : tensor<8x2xf32>
  }
}

//--- psum_2x2_x_of_xy_free_y.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main() -> (tensor<4x2xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<8x2xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x"} (%arg1: tensor<4x2xf32>) {
      %r = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
            ^bb0(%a: tensor<f32>, %b: tensor<f32>):
              %s = stablehlo.add %a, %b : tensor<f32>
              stablehlo.return %s : tensor<f32>
            }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
      sdy.return %r : tensor<4x2xf32>
    } : (tensor<8x2xf32>) -> tensor<4x2xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[8.0, 10.0], [12.0, 14.0], [16.0, 18.0], [20.0, 22.0]]> : tensor<4x2xf32>
    return %0 : tensor<4x2xf32>
  }
}

//--- psum_2x2_y.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main() -> (tensor<4x2xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<4x4xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x", "y"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
            ^bb0(%a: tensor<f32>, %b: tensor<f32>):
              %s = stablehlo.add %a, %b : tensor<f32>
              stablehlo.return %s : tensor<f32>
            }) : (tensor<2x2xf32>) -> tensor<2x2xf32>
      sdy.return %r : tensor<2x2xf32>
    } : (tensor<4x4xf32>) -> tensor<4x2xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[2.0, 4.0], [10.0, 12.0], [18.0, 20.0], [26.0, 28.0]]> : tensor<4x2xf32>
    return %0 : tensor<4x2xf32>
  }
}

//--- all_gather_2x2_x.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main() -> (tensor<4x4xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<4x4xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{}, {"y"}]>] manual_axes={"x", "y"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<2x2xf32>) -> tensor<4x2xf32>
      sdy.return %r : tensor<4x2xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]> : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

//--- psum_scatter_2x2_x.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main() -> (tensor<4x4xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<4x4xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>] manual_axes={"x", "y"} (%arg1: tensor<4x2xf32>) {
      %r = "stablehlo.reduce_scatter"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
            ^bb0(%a: tensor<f32>, %b: tensor<f32>):
              %s = stablehlo.add %a, %b : tensor<f32>
              stablehlo.return %s : tensor<f32>
            }) : (tensor<4x2xf32>) -> tensor<2x2xf32>
      sdy.return %r : tensor<2x2xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[0.0, 2.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0], [16.0, 18.0, 20.0, 22.0], [24.0, 26.0, 28.0, 30.0]]> : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

//--- all_to_all_2x2_y.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main() -> (tensor<4x4xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<4x4xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x", "y"}, {}]>] manual_axes={"x", "y"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.all_to_all"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<2x2xf32>) -> tensor<1x4xf32>
      sdy.return %r : tensor<1x4xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]> : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

//--- ppermute_2x2_y.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main() -> (tensor<4x4xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<4x4xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>] manual_axes={"x", "y"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.collective_permute"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0], [2, 3], [3, 2]]> : tensor<4x2xi64>}> : (tensor<2x2xf32>) -> tensor<2x2xf32>
      sdy.return %r : tensor<2x2xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[2.0, 3.0, 0.0, 1.0], [6.0, 7.0, 4.0, 5.0], [10.0, 11.0, 8.0, 9.0], [14.0, 15.0, 12.0, 13.0]]> : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

//--- axis_index_2x2.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main() -> (tensor<4xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<4xf32>
    %arg0 = stablehlo.reshape %i : (tensor<4xf32>) -> tensor<4xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x", "y"}]>] out_shardings=[<@mesh, [{"x", "y"}]>] manual_axes={"x", "y"} (%arg1: tensor<1xf32>) {
      %pid = stablehlo.partition_id : tensor<ui32>
      %two = stablehlo.constant dense<2> : tensor<ui32>
      %one = stablehlo.constant dense<1> : tensor<ui32>
      %qx = stablehlo.divide %pid, %two : tensor<ui32>
      %rx = stablehlo.remainder %qx, %two : tensor<ui32>
      %qy = stablehlo.divide %pid, %one : tensor<ui32>
      %ry = stablehlo.remainder %qy, %two : tensor<ui32>
      %ix = stablehlo.convert %rx : (tensor<ui32>) -> tensor<i32>
      %iy = stablehlo.convert %ry : (tensor<ui32>) -> tensor<i32>
      %ten = stablehlo.constant dense<10> : tensor<i32>
      %tx = stablehlo.multiply %ix, %ten : tensor<i32>
      %s = stablehlo.add %tx, %iy : tensor<i32>
      %fs = stablehlo.convert %s : (tensor<i32>) -> tensor<f32>
      %r = stablehlo.reshape %fs : (tensor<f32>) -> tensor<1xf32>
      sdy.return %r : tensor<1xf32>
    } : (tensor<4xf32>) -> tensor<4xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[0.0, 1.0, 10.0, 11.0]> : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

//--- jax_combo.mlir
module @jit_step attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<4x4xf32>) -> (tensor<2x4xf32> {jax.result_info = "[0]"}, tensor<8x4xf32> {jax.result_info = "[1]"}, tensor<32x4xf32> {jax.result_info = "[2]"}) {
    %0:3 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"x"}, {}]>, <@mesh, [{}, {}]>] out_shardings=[<@mesh, [{}, {}]>, <@mesh, [{"x"}, {}]>, <@mesh, [{}, {}]>] manual_axes={"x"} (%arg2: tensor<2x4xf32>, %arg3: tensor<4x4xf32>) {
      %1 = stablehlo.dot_general %arg2, %arg3, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %2 = "stablehlo.all_reduce"(%1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
        %7 = stablehlo.add %arg4, %arg5 : tensor<f32>
        stablehlo.return %7 : tensor<f32>
      }) : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %3 = "stablehlo.collective_permute"(%arg2) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %4 = stablehlo.tanh %3 : tensor<2x4xf32>
      %5 = "stablehlo.all_gather"(%4) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> : (tensor<2x4xf32>) -> tensor<8x4xf32>
      %6 = "stablehlo.all_gather"(%5) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> : (tensor<8x4xf32>) -> tensor<32x4xf32>
      sdy.return %2, %4, %6 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<32x4xf32>
    } : (tensor<8x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<8x4xf32>, tensor<32x4xf32>)
    return %0#0, %0#1, %0#2 : tensor<2x4xf32>, tensor<8x4xf32>, tensor<32x4xf32>
  }
}

//--- jax_psum_2x2.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<4x6xf32> {jax.result_info = "result"}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{}, {"y"}]>] manual_axes={"x"} (%arg1: tensor<4x6xf32>) {
      %1 = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %2 = stablehlo.maximum %arg2, %arg3 : tensor<f32>
        stablehlo.return %2 : tensor<f32>
      }) : (tensor<4x6xf32>) -> tensor<4x6xf32>
      sdy.return %1 : tensor<4x6xf32>
    } : (tensor<8x6xf32>) -> tensor<4x6xf32>
    return %0 : tensor<4x6xf32>
  }
}

//--- jax_ring.mlir
module @jit_ring attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x4xf32> {jax.result_info = "result"}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<2x4xf32>) {
      %c0 = stablehlo.constant dense<0> : tensor<i32>
      %c1 = stablehlo.constant dense<1> : tensor<i32>
      %c3 = stablehlo.constant dense<3> : tensor<i32>
      %1:3 = stablehlo.while(%i = %c0, %x = %arg1, %acc = %arg1) : tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>
       cond {
        %p = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %p : tensor<i1>
      } do {
        %y = "stablehlo.collective_permute"(%x) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : (tensor<2x4xf32>) -> tensor<2x4xf32>
        %a = stablehlo.multiply %acc, %y : tensor<2x4xf32>
        %n = stablehlo.add %i, %c1 : tensor<i32>
        stablehlo.return %n, %y, %a : tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>
      }
      sdy.return %1#2 : tensor<2x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}

//--- pmax_select_2x2.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main() -> (tensor<2x4xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<4x4xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{}, {"y"}]>] manual_axes={"x", "y"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
            ^bb0(%a: tensor<f32>, %b: tensor<f32>):
              %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
              %s = stablehlo.select %gt, %a, %b : tensor<i1>, tensor<f32>
              stablehlo.return %s : tensor<f32>
            }) : (tensor<2x2xf32>) -> tensor<2x2xf32>
      %n = stablehlo.negate %r : tensor<2x2xf32>
      sdy.return %n : tensor<2x2xf32>
    } : (tensor<4x4xf32>) -> tensor<2x4xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[-8.0, -9.0, -10.0, -11.0], [-12.0, -13.0, -14.0, -15.0]]> : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

//--- bcast_4.mlir
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main() -> (tensor<8x2xf32> {jax.result_info = "result"}) {
    %i = stablehlo.iota dim = 0 : tensor<16xf32>
    %arg0 = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<8x2xf32>
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<2x2xf32>) {
      %r = "stablehlo.collective_broadcast"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[2, 0, 1]]> : tensor<1x3xi64>}> : (tensor<2x2xf32>) -> tensor<2x2xf32>
      sdy.return %r : tensor<2x2xf32>
    } : (tensor<8x2xf32>) -> tensor<8x2xf32>
    // CHECKOP: check.expect_eq_const %0, dense<[[8.0, 9.0], [10.0, 11.0], [8.0, 9.0], [10.0, 11.0], [8.0, 9.0], [10.0, 11.0], [0.0, 0.0], [0.0, 0.0]]> : tensor<8x2xf32>
    return %0 : tensor<8x2xf32>
  }
}
