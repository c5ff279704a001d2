// Per-process programs through `shardplan run` (docs/executor.md, "Replicas
// and top-level collectives"): modules with mhlo.num_replicas > 1 (as JAX's
// pmap lowers them) or StableHLO collectives at the top level of main, run
// on replicas x partitions device workers, every device the whole program
// as one process, against the interpreter's run of every process; the
// spec's process groups (cross_replica, cross_partition,
// cross_replica_and_partition, flattened ids) over 2 and 4 devices;
// collective_broadcast; reduction bodies of several ops; check ops
// evaluated on each device's values. Each file runs once for the numerics
// MATCH and once with its CHECKOP lines made checks, whose expected values
// are worked out by hand (per-device ones from replica_id and partition_id
// in the program); a wrong expected value is caught on every device.
// RUN: split-file %s %t
// RUN: shardplan run %t/pmap4.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/pmap4.mlir > %t/pmap4_c.mlir && shardplan run %t/pmap4_c.mlir | FileCheck %s --check-prefix=HELD4
// RUN: shardplan run %t/pmap2.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/pmap2.mlir > %t/pmap2_c.mlir && shardplan run %t/pmap2_c.mlir | FileCheck %s --check-prefix=HELD2
// RUN: shardplan run %t/grid.mlir --iters 2 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/grid.mlir > %t/grid_c.mlir && shardplan run %t/grid_c.mlir | FileCheck %s --check-prefix=GRID
// RUN: shardplan run %t/parts.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/parts.mlir > %t/parts_c.mlir && shardplan run %t/parts_c.mlir | FileCheck %s --check-prefix=PARTS
// RUN: shardplan run %t/bcast.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/bcast.mlir > %t/bcast_c.mlir && shardplan run %t/bcast_c.mlir | FileCheck %s --check-prefix=HELD4
// RUN: sed -e 's|replica_groups = dense<\[\[2, 1\]\]> : tensor<1x2xi64>|replica_groups = dense<> : tensor<0x0xi64>|' -e 's|\[\[0, 0\], \[5, 6\], \[5, 6\], \[0, 0\]\]|[[1, 2], [1, 2], [1, 2], [1, 2]]|' %t/bcast.mlir > %t/bcast_all.mlir && shardplan run %t/bcast_all.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/bcast_all.mlir > %t/bcast_all_c.mlir && shardplan run %t/bcast_all_c.mlir | FileCheck %s --check-prefix=HELD4
// RUN: shardplan run %t/bodies.mlir --iters 1 | FileCheck %s --check-prefix=MATCH
// RUN: sed 's|// CHECKOP: ||' %t/bodies.mlir > %t/bodies_c.mlir && shardplan run %t/bodies_c.mlir | FileCheck %s --check-prefix=BODIES
// RUN: shardplan run %t/pmap_args.mlir --iters 2 | FileCheck %s --check-prefix=MATCH
// RUN: sed -e 's|// CHECKOP: ||' -e 's|60.0, 64.0|60.0, 65.0|' %t/pmap4.mlir > %t/wrong.mlir && not shardplan run %t/wrong.mlir 2>&1 | FileCheck %s --check-prefix=WRONG
// RUN: not shardplan run %t/pmap4.mlir --devices 2 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not shardplan run %t/sharded_top.mlir 2>&1 | FileCheck %s --check-prefix=SHARDED
// RUN: not shardplan run %t/sharded_replicas.mlir 2>&1 | FileCheck %s --check-prefix=SHREP
// RUN: not shardplan run %t/send.mlir 2>&1 | FileCheck %s --check-prefix=SEND

// MATCH: numerics: match
// HELD4: checks: 4 of 4 held (interpreter, every process); partitioned on 4 devices: 4 of 4 held
// HELD2: checks: 2 of 2 held (interpreter, every process); partitioned on 2 devices: 2 of 2 held
// GRID: checks: 28 of 28 held (interpreter, every process); partitioned on 4 devices: 28 of 28 held
// PARTS: checks: 8 of 8 held (interpreter, every process); partitioned on 4 devices: 8 of 8 held
// BODIES: checks: 12 of 12 held (interpreter, every process); partitioned on 4 devices: 12 of 12 held
// WRONG-DAG: wrong.mlir:{{[0-9]+}}:5: check.expect_eq_const failed: element 1: got 64, expected 65 [device 0: replica 0, partition 0]
// WRONG-DAG: wrong.mlir:{{[0-9]+}}:5: check.expect_eq_const failed: element 1: got 64, expected 65 [device 3: replica 3, partition 0]
// WRONG: checks: 0 of 4 held (interpreter, every process); partitioned on 4 devices: 0 of 4 held
// DEVICES: a program of 4 replicas x 1 partitions runs on 4 devices, not 2
// SHARDED: op stablehlo.all_reduce at the top level of a Shardy-sharded program has no meaning
// SHREP: a module of 2 replicas with Shardy shardings cannot be executed yet
// SEND: op stablehlo.send cannot be executed on the device workers yet

//--- pmap4.mlir
// jax.pmap(lambda x: jax.lax.psum(x + 10 * axis_index, "i")) over 4 replicas
module @jit_pmap attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main() -> tensor<2xf32> {
    %i = stablehlo.iota dim = 0 : tensor<2xf32>
    %rid = stablehlo.replica_id : tensor<ui32>
    %f = stablehlo.convert %rid : (tensor<ui32>) -> tensor<f32>
    %ten = stablehlo.constant dense<10.0> : tensor<f32>
    %f10 = stablehlo.multiply %f, %ten : tensor<f32>
    %b = stablehlo.broadcast_in_dim %f10, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %x = stablehlo.add %i, %b : tensor<2xf32>
    %r = "stablehlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}> ({
      ^bb0(%a: tensor<f32>, %c: tensor<f32>):
        %s = stablehlo.add %a, %c : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    // CHECKOP: check.expect_eq_const %r, dense<[60.0, 64.0]> : tensor<2xf32>
    return %r : tensor<2xf32>
  }
}

//--- pmap2.mlir
module @jit_pmap attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main() -> (tensor<2xf32>, tensor<ui32>) {
    %i = stablehlo.iota dim = 0 : tensor<2xf32>
    %rid = stablehlo.replica_id : tensor<ui32>
    %f = stablehlo.convert %rid : (tensor<ui32>) -> tensor<f32>
    %ten = stablehlo.constant dense<10.0> : tensor<f32>
    %f10 = stablehlo.multiply %f, %ten : tensor<f32>
    %b = stablehlo.broadcast_in_dim %f10, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %x = stablehlo.add %i, %b : tensor<2xf32>
    %r = "stablehlo.all_reduce"(%x) <{replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>}> ({
      ^bb0(%a: tensor<f32>, %c: tensor<f32>):
        %s = stablehlo.add %a, %c : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    // CHECKOP: check.expect_eq_const %r, dense<[10.0, 12.0]> : tensor<2xf32>
    return %r, %rid : tensor<2xf32>, tensor<ui32>
  }
}

//--- grid.mlir
// 2 replicas x 2 partitions; process (r, q) holds v = 10 r + q.
module @grid attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main() -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<2xf32>, tensor<2xf32>) {
    %ru = stablehlo.replica_id : tensor<ui32>
    %qu = stablehlo.partition_id : tensor<ui32>
    %rs = stablehlo.convert %ru : (tensor<ui32>) -> tensor<f32>
    %qs = stablehlo.convert %qu : (tensor<ui32>) -> tensor<f32>
    %r = stablehlo.broadcast_in_dim %rs, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %q = stablehlo.broadcast_in_dim %qs, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %c1 = stablehlo.constant dense<1.0> : tensor<1xf32>
    %c2 = stablehlo.constant dense<2.0> : tensor<1xf32>
    %c10 = stablehlo.constant dense<10.0> : tensor<1xf32>
    %r10 = stablehlo.multiply %r, %c10 : tensor<1xf32>
    %v = stablehlo.add %r10, %q : tensor<1xf32>
    // cross_replica_and_partition (a channel, no use_global_device_ids):
    // replica group [0, 1] times both partitions, all four: 0 + 1 + 10 + 11
    %crp = "stablehlo.all_reduce"(%v) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<1xf32>) -> tensor<1xf32>
    // CHECKOP: check.expect_eq_const %crp, dense<22.0> : tensor<1xf32>
    // flattened ids: {0, 3} = {(0,0), (1,1)}: 0 + 11; {1, 2} = {(0,1), (1,0)}: 1 + 10
    %flat = "stablehlo.all_reduce"(%v) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 3], [1, 2]]> : tensor<2x2xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<1xf32>) -> tensor<1xf32>
    // CHECKOP: check.expect_eq_const %flat, dense<11.0> : tensor<1xf32>
    // cross_replica (no channel): both replicas of partition q: q + (10 + q) = 10 + 2 q
    %xr = "stablehlo.all_reduce"(%v) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<1xf32>) -> tensor<1xf32>
    %q2 = stablehlo.multiply %q, %c2 : tensor<1xf32>
    %xr_want = stablehlo.add %q2, %c10 : tensor<1xf32>
    // CHECKOP: check.expect_eq %xr, %xr_want : tensor<1xf32>
    // collective_permute with a channel (cross_partition): (r, q) takes (r, 1 - q): 10 r + 1 - q
    %cp = "stablehlo.collective_permute"(%v) <{channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<1xf32>) -> tensor<1xf32>
    %r10p1 = stablehlo.add %r10, %c1 : tensor<1xf32>
    %cp_want = stablehlo.subtract %r10p1, %q : tensor<1xf32>
    // CHECKOP: check.expect_eq %cp, %cp_want : tensor<1xf32>
    // collective_permute without one (cross_replica): (1, q) takes (0, q) = q, (0, q) nothing: r q
    %cpr = "stablehlo.collective_permute"(%v) <{source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<1xf32>) -> tensor<1xf32>
    %cpr_want = stablehlo.multiply %r, %q : tensor<1xf32>
    // CHECKOP: check.expect_eq %cpr, %cpr_want : tensor<1xf32>
    // all_gather without a channel (cross_replica): [q, 10 + q]
    %ag = "stablehlo.all_gather"(%v) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<1xf32>) -> tensor<2xf32>
    %io = stablehlo.iota dim = 0 : tensor<2xf32>
    %c10v = stablehlo.constant dense<10.0> : tensor<2xf32>
    %io10 = stablehlo.multiply %io, %c10v : tensor<2xf32>
    %qb = stablehlo.broadcast_in_dim %qs, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %ag_want = stablehlo.add %io10, %qb : tensor<2xf32>
    // CHECKOP: check.expect_eq %ag, %ag_want : tensor<2xf32>
    // all_gather with use_global_device_ids, groups {3, 0} and {1, 2}: [11, 0] and [1, 10]
    %agf = "stablehlo.all_gather"(%v) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>, replica_groups = dense<[[3, 0], [1, 2]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<1xf32>) -> tensor<2xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %agf_s = stablehlo.reduce(%agf init: %z) applies stablehlo.add across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
    // CHECKOP: check.expect_eq_const %agf_s, dense<11.0> : tensor<f32>
    return %crp, %flat, %xr, %cp, %cpr, %ag, %agf : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<2xf32>, tensor<2xf32>
  }
}

//--- parts.mlir
// 1 replica x 4 partitions, no mesh (a program already partitioned by
// hand): collectives with channels over partitions, all_to_all, reduce_scatter.
module @parts attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> (tensor<4xf32>, tensor<1xf32>) {
    %qu = stablehlo.partition_id : tensor<ui32>
    %qs = stablehlo.convert %qu : (tensor<ui32>) -> tensor<f32>
    %q = stablehlo.broadcast_in_dim %qs, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %io = stablehlo.iota dim = 0 : tensor<4xf32>
    %c10 = stablehlo.constant dense<10.0> : tensor<4xf32>
    %q10 = stablehlo.multiply %q, %c10 : tensor<4xf32>
    // partition q holds [10 q, 10 q + 1, 10 q + 2, 10 q + 3]
    %v = stablehlo.add %q10, %io : tensor<4xf32>
    // all_to_all over all partitions: element k of partition j goes to partition k at j: [q, 10 + q, 20 + q, 30 + q]
    %a2a = "stablehlo.all_to_all"(%v) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, split_count = 4 : i64, split_dimension = 0 : i64}> : (tensor<4xf32>) -> tensor<4xf32>
    %qio = stablehlo.multiply %io, %c10 : tensor<4xf32>
    %a2a_want = stablehlo.add %qio, %q : tensor<4xf32>
    // CHECKOP: check.expect_eq %a2a, %a2a_want : tensor<4xf32>
    // reduce_scatter over partitions (flattened ids): element q summed: 4 q + 60
    %rs = "stablehlo.reduce_scatter"(%v) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<1xf32>
    %q1 = stablehlo.broadcast_in_dim %qs, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %c4 = stablehlo.constant dense<4.0> : tensor<1xf32>
    %c60 = stablehlo.constant dense<60.0> : tensor<1xf32>
    %q4 = stablehlo.multiply %q1, %c4 : tensor<1xf32>
    %rs_want = stablehlo.add %q4, %c60 : tensor<1xf32>
    // CHECKOP: check.expect_eq %rs, %rs_want : tensor<1xf32>
    return %a2a, %rs : tensor<4xf32>, tensor<1xf32>
  }
}

//--- bcast.mlir
// collective_broadcast as spec.md's example: 4 replicas, group [2, 1]
// (source replica 2); replicas 0 and 3 are in no group and get zeros.
// Without groups (bcast_all) every replica is in one, replica 0 its source.
module @bcast attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main() -> tensor<4x2xi64> {
    %ru = stablehlo.replica_id : tensor<ui32>
    %r = stablehlo.convert %ru : (tensor<ui32>) -> tensor<i64>
    %rb = stablehlo.broadcast_in_dim %r, dims = [] : (tensor<i64>) -> tensor<1x2xi64>
    %two = stablehlo.constant dense<2> : tensor<1x2xi64>
    %io = stablehlo.iota dim = 1 : tensor<1x2xi64>
    %one = stablehlo.constant dense<1> : tensor<1x2xi64>
    %r2 = stablehlo.multiply %rb, %two : tensor<1x2xi64>
    %io1 = stablehlo.add %io, %one : tensor<1x2xi64>
    // replica r holds [[2 r + 1, 2 r + 2]]
    %x = stablehlo.add %r2, %io1 : tensor<1x2xi64>
    %b = "stablehlo.collective_broadcast"(%x) <{replica_groups = dense<[[2, 1]]> : tensor<1x2xi64>}> : (tensor<1x2xi64>) -> tensor<1x2xi64>
    %g = "stablehlo.all_gather"(%b) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}> : (tensor<1x2xi64>) -> tensor<4x2xi64>
    // CHECKOP: check.expect_eq_const %g, dense<[[0, 0], [5, 6], [5, 6], [0, 0]]> : tensor<4x2xi64>
    return %g : tensor<4x2xi64>
  }
}

//--- bodies.mlir
// Reduction bodies of more than one op, run by the interpreter's region
// evaluator on the workers: a max by compare and select, a min of
// integers likewise, and max(a + b, 0) (a sum of non-negative values).
module @bodies attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> (tensor<2xf32>, tensor<1xi32>, tensor<2xf32>) {
    %qu = stablehlo.partition_id : tensor<ui32>
    %qs = stablehlo.convert %qu : (tensor<ui32>) -> tensor<f32>
    %q = stablehlo.broadcast_in_dim %qs, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %io = stablehlo.iota dim = 0 : tensor<2xf32>
    %c3 = stablehlo.constant dense<3.0> : tensor<2xf32>
    %q3 = stablehlo.multiply %q, %c3 : tensor<2xf32>
    // partition q holds [3 q, 3 q + 1]; after the max: [9, 10]
    %v = stablehlo.add %q3, %io : tensor<2xf32>
    %mx = "stablehlo.all_reduce"(%v) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %s = stablehlo.select %gt, %a, %b : tensor<i1>, tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    // CHECKOP: check.expect_eq_const %mx, dense<[9.0, 10.0]> : tensor<2xf32>
    // i32 [7 - q, 20 + q, ...] scattered by a min body over pairs {0, 1}, {2, 3}:
    // partition q gets element q % 2 of the min over its pair
    %qi = stablehlo.convert %qu : (tensor<ui32>) -> tensor<i32>
    %qb = stablehlo.broadcast_in_dim %qi, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %base = stablehlo.constant dense<[7, 20]> : tensor<2xi32>
    %sg = stablehlo.constant dense<[-1, 1]> : tensor<2xi32>
    %qsg = stablehlo.multiply %qb, %sg : tensor<2xi32>
    %w = stablehlo.add %base, %qsg : tensor<2xi32>
    %mn = "stablehlo.reduce_scatter"(%w) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
      ^bb0(%a: tensor<i32>, %b: tensor<i32>):
        %lt = stablehlo.compare LT, %a, %b : (tensor<i32>, tensor<i32>) -> tensor<i1>
        %s = stablehlo.select %lt, %a, %b : tensor<i1>, tensor<i32>
        stablehlo.return %s : tensor<i32>
    }) : (tensor<2xi32>) -> tensor<1xi32>
    // pair {0, 1}: min([7, 20], [6, 21]) = [6, 20]; pair {2, 3}: min([5, 22], [4, 23]) = [4, 22]
    // partition 0: 6, 1: 20, 2: 4, 3: 22 = 6 + 14 (q % 2) - 2 (q / 2) ... by table:
    %tab = stablehlo.constant dense<[6, 20, 4, 22]> : tensor<4xi32>
    %want = "stablehlo.dynamic_slice"(%tab, %qi) <{slice_sizes = array<i64: 1>}> : (tensor<4xi32>, tensor<i32>) -> tensor<1xi32>
    // CHECKOP: check.expect_eq %mn, %want : tensor<1xi32>
    // max(a + b, 0) over all: [0 + 3 + 6 + 9, 1 + 4 + 7 + 10] = [18, 22]
    %rl = "stablehlo.all_reduce"(%v) <{replica_groups = dense<[[0]]> : tensor<1x1xi64>, channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        %z = stablehlo.constant dense<0.0> : tensor<f32>
        %m = stablehlo.maximum %s, %z : tensor<f32>
        stablehlo.return %m : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    // CHECKOP: check.expect_eq_const %rl, dense<[18.0, 22.0]> : tensor<2xf32>
    return %mx, %mn, %rl : tensor<2xf32>, tensor<1xi32>, tensor<2xf32>
  }
}

//--- pmap_args.mlir
// Seeded arguments: every replica takes the same ones (docs/executor.md).
module @jit_pmap attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%arg0: tensor<8x4xf32>, %arg1: tensor<4x4xf32>) -> (tensor<8x4xf32>, tensor<2x4xf32>) {
    %rid = stablehlo.replica_id : tensor<ui32>
    %f = stablehlo.convert %rid : (tensor<ui32>) -> tensor<f32>
    %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %x = stablehlo.add %arg0, %b : tensor<8x4xf32>
    %y = stablehlo.dot_general %x, %arg1, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %s = "stablehlo.all_reduce"(%y) <{replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>}> ({
      ^bb0(%a: tensor<f32>, %c: tensor<f32>):
        %m = stablehlo.maximum %a, %c : tensor<f32>
        stablehlo.return %m : tensor<f32>
    }) : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %rs = "stablehlo.reduce_scatter"(%s) <{replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, scatter_dimension = 0 : i64}> ({
      ^bb0(%a: tensor<f32>, %c: tensor<f32>):
        %m = stablehlo.add %a, %c : tensor<f32>
        stablehlo.return %m : tensor<f32>
    }) : (tensor<8x4xf32>) -> tensor<2x4xf32>
    return %s, %rs : tensor<8x4xf32>, tensor<2x4xf32>
  }
}

//--- sharded_top.mlir
module @top attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%arg0: tensor<8x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x2xf32> {
    %r = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<8x2xf32>) -> tensor<8x2xf32>
    return %r : tensor<8x2xf32>
  }
}

//--- sharded_replicas.mlir
module @rep attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<8x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x2xf32> {
    %r = stablehlo.add %arg0, %arg0 : tensor<8x2xf32>
    return %r : tensor<8x2xf32>
  }
}

//--- send.mlir
module @send attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %t = stablehlo.after_all : !stablehlo.token
    %t2 = "stablehlo.send"(%arg0, %t) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = false}> : (tensor<2xf32>, !stablehlo.token) -> !stablehlo.token
    return %arg0 : tensor<2xf32>
  }
}
