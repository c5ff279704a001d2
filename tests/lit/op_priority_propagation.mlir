// RUN: shardplan opt %s -split-input-file -sdy-op-priority-propagate | FileCheck %s

// Shardplan's own tests of the op-priority level of the propagation hierarchy
// (propagation.md "Operation based priorities": "The "pass-through" operations
// (e.g., element-wise operations and reshape) have the highest priority, while
// operations with shape transformation (e.g., dot and reduce) have lower
// priority"; sdy_propagation_passes.md -sdy-op-priority-propagate: iterations
// of a full aggressive propagation, each adding op heuristics, until every
// heuristic is used and a fixed point is reached).
//
// Each case makes one tensor reachable from two sides: a pass-through op
// (element-wise, reshape, transpose) and an op with a shape transformation
// (dot_general, reduce, broadcast_in_dim), with different axes. The
// pass-through side propagates at an earlier iteration, and a later iteration
// can only add axes to an open dim, never replace them (propagation.md
// "Overview": a fixed point is where "the sharding can no longer change
// without undoing previous sharding decisions"). So the pass-through side's
// axes must be what the tensor ends up with.
//
// ASSUMPTIONS where the docs do not spell the schedule out (Shardy's
// op-priority heuristics as we recall them): the first iteration runs only
// element-wise ops, reshape and transpose; the middle one adds
// broadcast_in_dim in the BACKWARD direction only (and the pass-through
// factors of other ops, e.g. the kept dims of a reduce); the last runs every
// op in both directions.

sdy.mesh @mesh = <["a"=2, "b"=2]>

// An add and a dot_general both feed %0: the add goes first and %0 takes "b"
// from %arg2; the dot then finds "a" on its lhs in conflict and changes
// nothing.
// CHECK-LABEL: func @elementwise_before_dot(
// CHECK-SAME:      %arg1: tensor<16x8xf32>,
// CHECK-SAME:  -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>})
func.func @elementwise_before_dot(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                                  %arg1: tensor<16x8xf32>,
                                  %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: %[[DOT:.*]] = stablehlo.dot_general %arg0, %arg1
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
  // CHECK-NEXT: stablehlo.add %[[DOT]], %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :
    (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// The same with the element-wise side further away: a transpose then a
// multiply. Both are pass-through, so "b" still reaches the dot result first.
// CHECK-LABEL: func @transpose_chain_before_dot(
func.func @transpose_chain_before_dot(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                                      %arg1: tensor<16x32xf32>,
                                      %arg2: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) -> tensor<8x32xf32> {
  // CHECK-NEXT: %[[DOT:.*]] = stablehlo.dot_general %arg0, %arg1
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
  // CHECK-NEXT: %[[T:.*]] = stablehlo.transpose %arg2, dims = [1, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
  // CHECK-NEXT: stablehlo.multiply %[[DOT]], %[[T]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :
    (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.transpose %arg2, dims = [1, 0] : (tensor<32x8xf32>) -> tensor<8x32xf32>
  %2 = stablehlo.multiply %0, %1 : tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// The doc's own pair: a reshape (pass-through) and a reduce (shape
// transformation) meet at an add. The reshape carries "a" from %arg0 to the
// add and on to the reduce result before the reduce runs; the reduce's
// operand is sharded on "b" on the kept dim, which then conflicts and loses.
// CHECK-LABEL: func @reshape_before_reduce(
func.func @reshape_before_reduce(%arg0: tensor<2x4x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}, {}]>},
                                 %arg1: tensor<8x16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}, {}]>}) -> tensor<8x16xf32> {
  // CHECK-NEXT: stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
  // CHECK-NEXT: stablehlo.constant
  // CHECK-NEXT: %[[RED:.*]] = stablehlo.reduce
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
  // CHECK:      stablehlo.add {{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
  %0 = stablehlo.reshape %arg0 : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1 = stablehlo.reduce(%arg1 init: %cst) applies stablehlo.add across dimensions = [2] :
    (tensor<8x16x4xf32>, tensor<f32>) -> tensor<8x16xf32>
  %2 = stablehlo.add %0, %1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// A broadcast_in_dim propagates backward at the middle iteration, before the
// dot_general's contracting factor (a reduction factor, last iteration) can
// reach %arg0 from the other side. (The dot comes first in program order, so
// running both at the same iteration could let the dot's "b" win.)
// CHECK-LABEL: func @broadcast_backward_before_dot(
// CHECK-SAME:      %arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}]>}
func.func @broadcast_backward_before_dot(%arg0: tensor<8xf32>,
                                         %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                                         %arg2: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
    -> (tensor<4xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: stablehlo.dot_general %arg2, %arg0
  // CHECK-NEXT: %[[BCAST:.*]] = stablehlo.broadcast_in_dim %arg0, dims = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
  // CHECK-NEXT: stablehlo.add %[[BCAST]], %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
  %0 = stablehlo.dot_general %arg2, %arg0, contracting_dims = [1] x [0] :
    (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  %1 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<8xf32>) -> tensor<8x16xf32>
  %2 = stablehlo.add %1, %arg1 : tensor<8x16xf32>
  return %0, %2 : tensor<4xf32>, tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// A broadcast_in_dim does NOT propagate forward at the middle iteration: its
// result gets "b" backward through the reduce (kept dim, a pass-through
// factor) from the add, not "a" forward from its own operand (which it could
// take if it ran forward at the middle iteration: it comes first in program
// order).
// CHECK-LABEL: func @broadcast_not_forward_at_middle(
func.func @broadcast_not_forward_at_middle(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>},
                                           %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}]>}) -> tensor<8xf32> {
  // CHECK-NEXT: %[[BCAST:.*]] = stablehlo.broadcast_in_dim %arg0, dims = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
  // CHECK-NEXT: stablehlo.constant
  // CHECK-NEXT: stablehlo.reduce(%[[BCAST]] init: %cst)
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}]>]>}
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<8xf32>) -> tensor<8x16xf32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] :
    (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = stablehlo.add %1, %arg1 : tensor<8xf32>
  return %2 : tensor<8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Without any competition a dot_general still propagates, at the last
// iteration: both free dims reach the result, and the element-wise op after
// it follows.
// CHECK-LABEL: func @dot_propagates_eventually(
// CHECK-SAME:  -> (tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>})
func.func @dot_propagates_eventually(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                                     %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) -> tensor<8x32xf32> {
  // CHECK-NEXT: %[[DOT:.*]] = stablehlo.dot_general %arg0, %arg1
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
  // CHECK-NEXT: stablehlo.negate %[[DOT]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :
    (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.negate %0 : tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Element-wise ops propagate backward too at the first iteration: "b" flows
// from the function result sharding back through the negate into the dot
// result before the dot can push "a" forward into it.
// CHECK-LABEL: func @elementwise_backward_before_dot(
func.func @elementwise_backward_before_dot(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                                           %arg1: tensor<16x32xf32>)
    -> (tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) {
  // CHECK-NEXT: %[[DOT:.*]] = stablehlo.dot_general %arg0, %arg1
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
  // CHECK-NEXT: stablehlo.negate %[[DOT]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :
    (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.negate %0 : tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// A later iteration can still add axes to a dim an earlier one left open: the
// add gives %0 "a" on dim 0 first; the dot then adds "b" on dim 1 (no
// conflict there).
// CHECK-LABEL: func @later_iteration_extends(
func.func @later_iteration_extends(%arg0: tensor<8x16xf32>,
                                   %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>},
                                   %arg2: tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x32xf32> {
  // CHECK-NEXT: %[[DOT:.*]] = stablehlo.dot_general %arg0, %arg1
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
  // CHECK-NEXT: stablehlo.add %[[DOT]], %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :
    (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}
