// RUN: shardplan opt %s -split-input-file -sdy-propagation-pipeline \
// RUN:   | sed -e '/sharding_per_value/s/, ?}/}/g' -e '/sharding_per_value/s/{?}/{}/g' | FileCheck %s

// Shardplan's own tests of the full propagation pipeline: import passes
// (sdy_import_passes.md: -sdy-apply-sharding-constraints,
// -sdy-add-data-flow-edges, -sdy-constant-or-scalar-splitter), propagation,
// then export passes (sdy_export_passes.md: -sdy-sink-data-flow-edges,
// -sdy-close-shardings).
//
// ASSUMPTIONS where the docs do not list the pipeline's passes or their exact
// output:
// - Function arguments and results are closed at the end of the pipeline
//   (-sdy-close-shardings "Closes tensor shardings and drops
//   replicated axes"), so they print as e.g. [{"a"}, {}]. Whether the
//   shardings of ops are closed as well is left open: the `sed` in the RUN
//   line rewrites `{"a", ?}` to `{"a"}` and `{?}` to `{}` on op lines (those
//   with `sharding_per_value`) only, so op CHECK lines are written closed and
//   match either way; function signatures are checked as printed.
// - A sharding constraint may come out as sdy.sharding_constraint or, if the
//   pipeline runs -sdy-sharding-constraint-to-reshard, as sdy.reshard; the
//   CHECK lines accept both.
// - Data-flow edge ops added on import are sunk on export, so none is left.
// - Whether identical split constants are merged again
//   (-sdy-constant-or-scalar-merger) is not checked; constants with different
//   shardings must stay apart.

sdy.mesh @mesh = <["a"=2, "b"=2]>

// A fully closed constraint with no other constraint users dictates the
// sharding of its input (-sdy-apply-sharding-constraints), which then flows
// to the argument and to the users.
// CHECK-LABEL: func @closed_constraint_applied(
// CHECK-SAME:      %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})
// CHECK-SAME:  -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})
func.func @closed_constraint_applied(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // CHECK-NEXT: %[[ADD:.*]] = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  // CHECK-NEXT: %[[SC:.*]] = sdy.{{sharding_constraint|reshard}} %[[ADD]] <@mesh, [{"a"}, {}]>
  // CHECK-NEXT: stablehlo.negate %[[SC]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]> : tensor<8x8xf32>
  %2 = stablehlo.negate %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// A single constraint is no chain (Shardy's getTailOfShardingConstraintChain
// returns null when the tail is the head): the later multiply keeps reading
// the add, which the constraint's sharding was applied to.
// CHECK-LABEL: func @later_use_goes_through_constraint(
func.func @later_use_goes_through_constraint(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // CHECK-NEXT: %[[ADD:.*]] = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  // CHECK-NEXT: %[[SC:.*]] = sdy.{{sharding_constraint|reshard}} %[[ADD]] <@mesh, [{"a"}, {"b"}]>
  // CHECK-NEXT: %[[NEG:.*]] = stablehlo.negate %[[SC]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  // CHECK-NEXT: stablehlo.multiply %[[ADD]], %[[NEG]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {"b"}]> : tensor<8x8xf32>
  %2 = stablehlo.negate %1 : tensor<8x8xf32>
  %3 = stablehlo.multiply %0, %2 : tensor<8x8xf32>
  return %3 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// While loop: one data-flow edge per loop-carried value, between the operand
// and the body's returned value (sources) and the result and the block
// arguments (targets) (propagation.md "Data flow ops"). %arg0's sharding
// reaches the while result and, through the body block argument, the add in
// the body; the function result follows.
// CHECK-LABEL: func @while_forward(
// CHECK-SAME:  -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})
func.func @while_forward(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x16xf32> {
  // CHECK-NOT:  sdy.data_flow_edge
  // CHECK:      stablehlo.while(%[[IT:[[:alnum:]_]+]] = %arg0, %{{[[:alnum:]_]+}} = %{{[[:alnum:]_]+}})
  // CHECK-SAME:   sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>, {{.*}}]>
  // CHECK:      stablehlo.add %[[IT]], %[[IT]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  // CHECK-NOT:  sdy.data_flow_edge
  // CHECK:      return
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<8x16xf32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.add %iterArg, %iterArg : tensor<8x16xf32>
      %2 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
      stablehlo.return %1, %2 : tensor<8x16xf32>, tensor<i32>
    }
  return %0#0 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// While loop, backward: the sharding starts inside the body (an add with a
// captured, sharded value), reaches the returned value, and through the edge
// the while result, the block argument and the while operand, i.e. the
// function argument %arg0. The function result follows the while result.
// CHECK-LABEL: func @while_from_body(
// CHECK-SAME:      %arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}
// CHECK-SAME:  -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
func.func @while_from_body(%arg0: tensor<8x16xf32>,
                           %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) -> tensor<8x16xf32> {
  // CHECK:      stablehlo.while(%[[IT:[[:alnum:]_]+]] = %arg0, %{{[[:alnum:]_]+}} = %{{[[:alnum:]_]+}})
  // CHECK-SAME:   sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>, {{.*}}]>
  // CHECK:      stablehlo.add %[[IT]], %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>}
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<8x16xf32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.add %iterArg, %arg1 : tensor<8x16xf32>
      %2 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
      stablehlo.return %1, %2 : tensor<8x16xf32>, tensor<i32>
    }
  return %0#0 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// A closed constraint on a data-flow edge target (a while result): instead
// of giving the while result the constraint's sharding, every use of the
// result is replaced by the constraint (-sdy-apply-sharding-constraints: "we
// replace all uses of `input` with the `ShardingConstraintOp`, to avoid
// restricting the sharding of all targets of the edge"), so the negate reads
// the constrained value. The edge itself stays open: it takes "a" on dim 0
// from the constraint and "b" on dim 1 from the while operand %arg0, and all
// its targets (the while result, the body block argument) agree.
// CHECK-LABEL: func @constraint_on_while_result(
func.func @constraint_on_while_result(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
    -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK:      %[[W:.*]]:2 = stablehlo.while(%[[IT:[[:alnum:]_]+]] = %arg0,
  // CHECK-SAME:   sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>, {{.*}}]>
  // CHECK:      stablehlo.negate %[[IT]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  // CHECK:      %[[SC:.*]] = sdy.{{sharding_constraint|reshard}} %[[W]]#0 <@mesh, [{"a"}, {}]>
  // CHECK-NEXT: stablehlo.negate %[[SC]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<8x16xf32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.negate %iterArg : tensor<8x16xf32>
      %2 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
      stablehlo.return %1, %2 : tensor<8x16xf32>, tensor<i32>
    }
  %1 = sdy.sharding_constraint %0#0 <@mesh, [{"a"}, {}]> : tensor<8x16xf32>
  %2 = stablehlo.negate %0#0 : tensor<8x16xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// The same rule for an optimization_barrier result: the constraint must not
// close the barrier's result 0 to [{"a"}, {}]; it gets "a" from the
// constraint and "b" from its operand.
// CHECK-LABEL: func @constraint_on_barrier_result(
func.func @constraint_on_barrier_result(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
    -> tensor<8x16xf32> {
  // CHECK-NEXT: %[[OB:.*]]:2 = stablehlo.optimization_barrier
  // CHECK-SAME:   sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>, <@mesh, [{}, {"b"}]>]>
  // CHECK-NEXT: sdy.{{sharding_constraint|reshard}} %[[OB]]#0 <@mesh, [{"a"}, {}]>
  %0:2 = stablehlo.optimization_barrier %arg0, %arg0 : tensor<8x16xf32>, tensor<8x16xf32>
  %1 = sdy.sharding_constraint %0#0 <@mesh, [{"a"}, {}]> : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// optimization_barrier is a data-flow op (propagation.md "Data flow ops"):
// each operand/result pair is one edge, in both directions, and the pairs are
// independent. Result 0 takes %arg0's "a" forward; result 1 takes "b" from
// the later add with %arg2, and %arg1 gets it backward.
// CHECK-LABEL: func @optimization_barrier_edges(
// CHECK-SAME:      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}
func.func @optimization_barrier_edges(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                                      %arg1: tensor<8x8xf32>,
                                      %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // CHECK-NEXT: %[[OB:.*]]:2 = stablehlo.optimization_barrier
  // CHECK-SAME:   sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>, <@mesh, [{}, {"b"}]>]>
  // CHECK-NEXT: stablehlo.negate %[[OB]]#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  // CHECK-NEXT: stablehlo.add %[[OB]]#1, %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>}
  %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<8x8xf32>, tensor<8x8xf32>
  %1 = stablehlo.negate %0#0 : tensor<8x8xf32>
  %2 = stablehlo.add %0#1, %arg2 : tensor<8x8xf32>
  return %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Function arguments and results are closed at the end: an open argument
// sharding and a result with no sharding both come out closed. The negate
// had "b" explicitly replicated; whether that stays is not checked (it does
// only if op shardings are not closed, see above).
// CHECK-LABEL: func @closed_at_the_end(
// CHECK-SAME:      %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})
// CHECK-SAME:  -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})
func.func @closed_at_the_end(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]{{(, replicated=\{"b"\})?}}>]>}
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {?}], replicated={"b"}>]>} : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// An open function result sharding is filled by propagation, then closed.
// CHECK-LABEL: func @open_result_filled_then_closed(
// CHECK-SAME:  -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>})
func.func @open_result_filled_then_closed(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>})
    -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {?}]>}) {
  %0 = stablehlo.abs %arg0 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Constant splitting (-sdy-constant-or-scalar-splitter): one constant used by
// two adds whose other operands are sharded differently. Without splitting
// the two uses would conflict on the shared constant; with it each copy takes
// the sharding of its own user.
// CHECK-LABEL: func @constant_split(
func.func @constant_split(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                          %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // CHECK-DAG: %[[C_A:.*]] = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} dense<1.000000e+00> : tensor<8x8xf32>
  // CHECK-DAG: %[[C_B:.*]] = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>} dense<1.000000e+00> : tensor<8x8xf32>
  // CHECK-DAG: stablehlo.add %arg0, %[[C_A]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  // CHECK-DAG: stablehlo.add %arg1, %[[C_B]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>}
  %cst = stablehlo.constant dense<1.000000e+00> : tensor<8x8xf32>
  %0 = stablehlo.add %arg0, %cst : tensor<8x8xf32>
  %1 = stablehlo.add %arg1, %cst : tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Scalar expansion splitting: a broadcast of a scalar used twice is split too,
// each broadcast taking the sharding of its user. The scalar itself has rank
// 0 and gets no sharding ("this pass does not split scalar tensors").
// CHECK-LABEL: func @scalar_expansion_split(
func.func @scalar_expansion_split(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                                  %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // CHECK-DAG: %[[B_A:.*]] = stablehlo.broadcast_in_dim %{{.*}}, dims = [] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  // CHECK-DAG: %[[B_B:.*]] = stablehlo.broadcast_in_dim %{{.*}}, dims = [] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>}
  // CHECK-DAG: stablehlo.maximum %arg0, %[[B_A]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  // CHECK-DAG: stablehlo.maximum %arg1, %[[B_B]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>}
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %0 = stablehlo.maximum %arg0, %b : tensor<8x8xf32>
  %1 = stablehlo.maximum %arg1, %b : tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// A dot_general chain through the pipeline: the closed input and weight
// shardings reach the result, which is closed at the end.
// CHECK-LABEL: func @dot_chain(
// CHECK-SAME:  -> (tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>})
func.func @dot_chain(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                     %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) -> tensor<8x32xf32> {
  // CHECK-NEXT: %[[DOT:.*]] = stablehlo.dot_general %arg0, %arg1
  // CHECK-SAME:   {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  // CHECK-NEXT: stablehlo.tanh %[[DOT]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :
    (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.tanh %0 : tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}
