// RUN: shardplan opt %s -split-input-file -sdy-user-priority-propagate | FileCheck %s

// Shardplan's own tests of the user-priority level of the propagation
// hierarchy (propagation.md "Conflict resolution hierarchy", item 1;
// sharding_representation.md "Priorities"; sdy_propagation_passes.md
// -sdy-user-priority-propagate: "at the i-th iteration, only dimension
// shardings with priority <=i are propagated").
//
// Every sharded dim in these inputs carries an explicit priority: the docs say
// a dim without one is p0 ("0 by default"), and these tests do not depend on
// that default. Empty closed dims `{}` carry none ("shouldn't have a
// priority").
//
// Output shardings of ops that had none are new and carry no priority. For
// the function arguments that had a priority we accept it printed or not
// ({{(p1)?}}): the docs do not say whether propagation keeps it.

sdy.mesh @mesh = <["a"=2, "b"=4]>

// p0 propagates before p1: the add's result takes "a" from %arg0 at the p0
// iteration; at the p1 iteration %arg1's "b" conflicts with it and is not
// propagated. Without priorities this would be a conflict within one factor.
// CHECK-LABEL: func @p0_before_p1(
// CHECK-SAME:  -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>})
func.func @p0_before_p1(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p0, {}]>},
                        %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}p1, {}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=4]>

// The same with the operands swapped and the p1 sharding the larger one: the
// priority, not the operand order nor the sharded size, decides.
// CHECK-LABEL: func @priority_not_operand_order(
func.func @priority_not_operand_order(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}p1, {}]>},
                                      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p0, {}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["data"=2, "model"=4]>

// Batch parallelism first, then megatron (sharding_representation.md
// "Priorities"). The input's batch dim is p0 on "data"; the weights and the
// bias are p1 on "model", and the bias also wants "model" on the batch dim.
// At p0 "data" reaches the batch dim of every activation; at p1 "model"
// shards the hidden dim of the first matmul and the contracting dim of the
// second, and the bias's "model" on the batch dim finds it taken by "data".
// CHECK-LABEL: func @batch_then_megatron(
func.func @batch_then_megatron(%x: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}p0, {}]>},
                               %w1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}p1]>},
                               %bias: tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}p1, {}]>},
                               %w2: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}p1, {}]>}) -> tensor<8x16xf32> {
  // CHECK-NEXT: %[[Y:.*]] = stablehlo.dot_general %arg0, %arg1
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data", ?}, {"model", ?}]>]>}
  // CHECK-NEXT: %[[YB:.*]] = stablehlo.add %[[Y]], %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data", ?}, {"model", ?}]>]>}
  // CHECK-NEXT: stablehlo.dot_general %[[YB]], %arg3
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>}
  %y = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] :
    (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %yb = stablehlo.add %y, %bias : tensor<8x32xf32>
  %z = stablehlo.dot_general %yb, %w2, contracting_dims = [1] x [0] :
    (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %z : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["data"=2, "model"=4]>

// Reversed priorities: megatron first. Now the bias's "model" reaches the
// batch dim at p0 (it is p0 here), and "data" (p1) finds it taken.
// CHECK-LABEL: func @megatron_then_batch(
func.func @megatron_then_batch(%x: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}p1, {}]>},
                               %bias: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}p0, {}]>}) -> tensor<8x16xf32> {
  // CHECK-NEXT: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"model", ?}, {?}]>]>}
  %0 = stablehlo.add %x, %bias : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>

// A lower-priority open dim is not overridden by a higher-priority sharding:
// %arg1's dim 0 is {"b", ?}p1. At the p0 iteration "a" from %arg0 reaches the
// add but must not be put on %arg1's dim 0 (it is hidden, not unsharded); at
// p1 "b" conflicts with the add's "a". So %arg1 keeps "b".
// CHECK-LABEL: func @lower_priority_open_dim_kept(
// CHECK-SAME:      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}{{(p1)?}}, {}]>})
func.func @lower_priority_open_dim_kept(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p0, {}]>},
                                        %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}p1, {}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>

// "such an open dimension can be further sharded after all higher priority
// shardings have been propagated": %arg1's {"b", ?}p1 is extended to
// ["b", "c"] by %arg2 at the p1 iteration, while the p0 "a" of %arg0 shards
// the other dim of everything.
// CHECK-LABEL: func @lower_priority_open_dim_extended(
// CHECK-SAME:      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "c", ?}{{(p1)?}}, {"a", ?}]>}
func.func @lower_priority_open_dim_extended(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"a"}p0]>},
                                            %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}p1, {?}]>},
                                            %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "c"}p1, {}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: %[[ADD:.*]] = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", "c", ?}, {"a", ?}]>]>}
  // CHECK-NEXT: stablehlo.add %[[ADD]], %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", "c", ?}, {"a", ?}]>]>}
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>

// Gaps between priorities are allowed (p0 and p2, no p1): the p2 sharding
// still propagates, after p0, where it does not conflict.
// CHECK-LABEL: func @priority_gap(
func.func @priority_gap(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p0, {}]>},
                        %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}p2, {"c"}p2]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"c", ?}]>]>}
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Priorities are per dim: one sharding with a p0 dim and a p1 dim. Dim 0
// propagates at the p0 iteration and dim 1 at the p1 iteration; with no
// conflict both end up on the multiply and on %arg1.
// CHECK-LABEL: func @per_dim_priorities(
// CHECK-SAME:      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>})
func.func @per_dim_priorities(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p0, {"b"}p1]>},
                              %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // CHECK-NEXT: stablehlo.multiply %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
  %0 = stablehlo.multiply %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
