// RUN: shardplan opt %s -split-input-file -sdy-propagation-pipeline \
// RUN:   | sed -e '/sharding_per_value/s/, ?}/}/g' -e '/sharding_per_value/s/{?}/{}/g' | FileCheck %s

// Shardplan's own tests of sharding groups (compiler_api.md "Sharding Group":
// "Sharding groups enforce shardings within the same group to be the same";
// sdy_dialect.md sdy.sharding_group: "as soon as one group element is
// sharded, all other members will be sharded in exactly the same way";
// sdy_import_passes.md -sdy-sharding-group-import: groups that share a member
// are merged).
//
// The op is written as sdy_dialect.md specifies it (`sdy.sharding_group %x
// group_id=N : type`, no result); compiler_api.md's example uses an older
// form (`%0 = sdy.sharding_group %x, id=0`).
//
// ASSUMPTIONS: after -sdy-propagation-pipeline function arguments and
// results are closed, so they print as [{"x"}, {"y"}]. Whether op shardings
// are closed too is not in the docs: the `sed` in the RUN line rewrites open
// dims to closed ones on op lines (`sharding_per_value`) only, so op CHECK
// lines are written closed and match either way. Whether the sharding_group
// ops are still there afterwards (-sdy-remove-sharding-groups) is not
// checked.

sdy.mesh @mesh_xy = <["x"=2, "y"=2]>

// compiler_api.md's example, in our words: the input and a constant that does
// not depend on it are in one group, so the constant, and through it the
// output, take the input's sharding.
// CHECK-LABEL: func @zeros_like(
// CHECK-SAME:  -> (tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>})
func.func @zeros_like(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) -> tensor<8x2xi64> {
  // CHECK: sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh_xy, [{"x"}, {"y"}]>]>} dense<0> : tensor<8x2xi64>
  sdy.sharding_group %arg0 group_id=0 : tensor<8x2xi64>
  %0 = stablehlo.constant dense<0> : tensor<8x2xi64>
  sdy.sharding_group %0 group_id=0 : tensor<8x2xi64>
  return %0 : tensor<8x2xi64>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Two computations with no data dependency between them: the group carries
// "a" from the first to the second, and propagation carries it on to %arg1
// (backward through the multiply) and to the second result.
// CHECK-LABEL: func @group_links_independent_values(
// CHECK-SAME:      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})
// CHECK-SAME:  -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})
func.func @group_links_independent_values(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                                          %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // CHECK:      stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  // CHECK:      stablehlo.multiply %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
  %1 = stablehlo.multiply %arg1, %arg1 : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Program order does not matter: the sharded member is defined after the
// unsharded one.
// CHECK-LABEL: func @sharded_member_defined_later(
// CHECK-SAME:      %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}
func.func @sharded_member_defined_later(%arg0: tensor<8x8xf32>,
                                        %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // CHECK:      stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>}
  // CHECK:      stablehlo.abs %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>}
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
  %1 = stablehlo.abs %arg1 : tensor<8x8xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Three members: all of them end up alike.
// CHECK-LABEL: func @three_members(
// CHECK-SAME:      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
// CHECK-SAME:      %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>})
func.func @three_members(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                         %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>) -> tensor<8x8xf32> {
  sdy.sharding_group %arg0 group_id=3 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=3 : tensor<8x8xf32>
  sdy.sharding_group %arg2 group_id=3 : tensor<8x8xf32>
  %0 = stablehlo.add %arg1, %arg2 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Groups that share a member are one group (-sdy-sharding-group-import,
// "Sharding Group Unification"): %arg1 is in groups 0 and 1, so %arg0 (group
// 0) and %arg2 (group 1) are linked through it.
// CHECK-LABEL: func @groups_sharing_a_member_merge(
// CHECK-SAME:      %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>},
// CHECK-SAME:      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>},
// CHECK-SAME:      %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>})
func.func @groups_sharing_a_member_merge(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>,
                                         %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  sdy.sharding_group %arg0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=1 : tensor<8x8xf32>
  sdy.sharding_group %arg2 group_id=1 : tensor<8x8xf32>
  return %arg0, %arg1, %arg2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Different groups stay apart: group 0 gets "a" on dim 0, group 1 gets "b"
// on dim 1, and neither leaks into the other.
// CHECK-LABEL: func @separate_groups(
// CHECK-SAME:      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
// CHECK-SAME:      %arg3: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
func.func @separate_groups(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                           %arg1: tensor<8x8xf32>,
                           %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>},
                           %arg3: tensor<8x8xf32>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  sdy.sharding_group %arg0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %arg2 group_id=1 : tensor<8x8xf32>
  sdy.sharding_group %arg3 group_id=1 : tensor<8x8xf32>
  return %arg1, %arg3 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Each member is sharded on a different dim from outside the group: member
// %0 gets "a" on dim 0 from %arg0, member %1 gets "b" on dim 1 from %arg1.
// Since members must be sharded "in exactly the same way", both end up with
// both axes.
// CHECK-LABEL: func @members_combine_dims(
func.func @members_combine_dims(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {?}]>},
                                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b"}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // CHECK:      stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  // CHECK:      stablehlo.negate %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  %1 = stablehlo.negate %arg1 : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// A group member inside a while body: the loop-carried value is in a group
// with a sharded argument, so the add in the body, the while result and the
// function result take that sharding.
// CHECK-LABEL: func @member_in_while_body(
// CHECK-SAME:  -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>})
func.func @member_in_while_body(%arg0: tensor<8x8xf32>,
                                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> tensor<8x8xf32> {
  // CHECK:      stablehlo.while(%[[IT:[[:alnum:]_]+]] = %arg0,
  // CHECK:      stablehlo.add %[[IT]], %[[IT]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<8x8xf32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.add %iterArg, %iterArg : tensor<8x8xf32>
      sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
      %2 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
      stablehlo.return %1, %2 : tensor<8x8xf32>, tensor<i32>
    }
  sdy.sharding_group %arg1 group_id=0 : tensor<8x8xf32>
  return %0#0 : tensor<8x8xf32>
}
