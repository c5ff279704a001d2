// RUN: shardplan opt %s -sdy-reshard-to-collectives | FileCheck %s
// RUN: shardplan opt %s -sdy-reshard-to-collectives='keep-redundant-reshards=true' \
// RUN:   | FileCheck %s --check-prefix=KEEP
// RUN: shardplan opt %s -sdy-reshard-to-collectives -shardplan-annotate-device-groups \
// RUN:   | FileCheck %s --check-prefix=GROUPS

// Shardplan's own cases of -sdy-reshard-to-collectives (sdy_export_passes.md:
// "Matches reshard ops and rewrites them into various Shardy collective ops";
// sdy_dialect.md gives each collective's semantics), in our words, plus the
// sdy.device_groups attribute that -shardplan-annotate-device-groups adds
// (ours, not Shardy's: the replica groups XLA would use, row-major over the
// mesh positions outside the collective axes, each group ordered along them).

sdy.mesh @m = <["a"=2, "b"=2, "c"=2]>
sdy.mesh @m84 = <["p"=8, "q"=4]>
sdy.mesh @flipped = <["a"=2, "b"=2, "c"=2], device_ids=[1, 0, 3, 2, 5, 4, 7, 6]>

// sdy_export_passes.md's example: the dropped suffix is all-gathered.
// CHECK-LABEL: func @doc_example
func.func @doc_example(%arg0: tensor<16x2xf32> {sdy.sharding = #sdy.sharding<@m, [{"a", "b", "c"}, {}]>}) -> tensor<16x2xf32> {
  // CHECK-NEXT: %0 = sdy.all_gather [{"b", "c"}, {}] %arg0 out_sharding=<@m, [{"a"}, {}]>
  // CHECK-NEXT: return %0
  // GROUPS: sdy.all_gather [{"b", "c"}, {}] %arg0 out_sharding=<@m, [{"a"}, {}]> {sdy.device_groups = dense<{{\[\[0, 1, 2, 3\], \[4, 5, 6, 7\]\]}}> : tensor<2x4xi64>}
  %0 = sdy.reshard %arg0 <@m, [{"a"}, {}]> : tensor<16x2xf32>
  return %0 : tensor<16x2xf32>
}

// New axes on an unsharded dimension are sliced in one op.
// CHECK-LABEL: func @slice_two_dims
func.func @slice_two_dims(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // CHECK-NEXT: %0 = sdy.all_slice [{"c"}, {"a", "b"}] %arg0 out_sharding=<@m, [{"c"}, {"a", "b"}]>
  // GROUPS: sdy.all_slice {{.*}} {sdy.device_groups = dense<{{\[\[0, 2, 4, 6, 1, 3, 5, 7\]\]}}> : tensor<1x8xi64>}
  %0 = sdy.reshard %arg0 <@m, [{"c"}, {"a", "b"}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// The trailing axis of dimension 1 moves to the end of dimension 0.
// CHECK-LABEL: func @move_minor_axis
func.func @move_minor_axis(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m, [{"a"}, {"b", "c"}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: %0 = sdy.all_to_all [{"c"}: 1->0] %arg0 out_sharding=<@m, [{"a", "c"}, {"b"}]>
  %0 = sdy.reshard %arg0 <@m, [{"a", "c"}, {"b"}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// Exchanging equal-size axes between dimensions is one collective permute.
// CHECK-LABEL: func @exchange
func.func @exchange(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m, [{"a"}, {"c"}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: %0 = sdy.collective_permute %arg0 out_sharding=<@m, [{"c"}, {"a"}]>
  // CHECK-NEXT: return %0
  %0 = sdy.reshard %arg0 <@m, [{"c"}, {"a"}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// A sub-axis that the output keeps stays; the rest of the axis is gathered.
// CHECK-LABEL: func @keep_major_sub_axis
func.func @keep_major_sub_axis(%arg0: tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@m84, [{"p"}, {"q"}]>}) -> tensor<16x4xf32> {
  // CHECK-NEXT: %0 = sdy.all_gather [{"p":(2)4}, {"q"}] %arg0 out_sharding=<@m84, [{"p":(1)2}, {}]>
  %0 = sdy.reshard %arg0 <@m84, [{"p":(1)2}, {}]> : tensor<16x4xf32>
  return %0 : tensor<16x4xf32>
}

// Same axes, other device order: a collective permute to the new mesh first.
// CHECK-LABEL: func @other_device_order
func.func @other_device_order(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m, [{"a"}, {"b"}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: %0 = sdy.collective_permute %arg0 out_sharding=<@flipped, [{"a"}, {"b"}]>
  // CHECK-NEXT: %1 = sdy.all_gather [{"a"}, {}] %0 out_sharding=<@flipped, [{}, {"b"}]>
  // GROUPS: sdy.all_gather [{"a"}, {}] %0 out_sharding=<@flipped, [{}, {"b"}]> {sdy.device_groups = dense<{{\[\[1, 5\], \[0, 4\], \[3, 7\], \[2, 6\]\]}}> : tensor<4x2xi64>}
  %0 = sdy.reshard %arg0 <@flipped, [{}, {"b"}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// A reshard to what the value already has goes away, unless kept.
// CHECK-LABEL: func @nothing_to_do
// KEEP-LABEL: func @nothing_to_do
func.func @nothing_to_do(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  // CHECK-NEXT: return %arg0
  // KEEP-NEXT: %0 = sdy.reshard %arg0 <@m, [{"a", ?}, {?}]>
  // KEEP-NEXT: return %0
  %0 = sdy.reshard %arg0 <@m, [{"a", ?}, {?}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
