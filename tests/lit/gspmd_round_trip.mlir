// RUN: shardplan opt %s -xla-sdy-round-trip-import-pipeline | FileCheck %s
// RUN: shardplan plan %s | FileCheck %s --check-prefix=PLAN
// The shard_map export is the import's inverse:
// RUN: shardplan opt %s -xla-sdy-round-trip-import-pipeline > %t.mlir && \
// RUN:   shardplan opt %t.mlir -xla-sdy-round-trip-shard-map-export -xla-sdy-round-trip-shard-map-import | diff - %t.mlir

// A module in the form jax.export artifacts and XLA's dumps carry after
// Shardy ran (XLA's sdy round trip, here in StableHLO): the meshes in the
// module's xla.sdy.meshes frontend attribute, each sharding as sdy text in
// an xla.sdy.sharding frontend attribute, the func results through
// @xla.sdy.FuncResultSharding, a shard_map between xla.sdy.GlobalToLocalShape
// and xla.sdy.LocalToGlobalShape. mhlo.sharding strings XLA keeps beside
// them are dropped, as are xla.sdy.sharding of ordinary ops.

// CHECK:      module @jit_f attributes {mhlo.num_partitions = 8 : i32} {
// CHECK-NEXT:   sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
// CHECK-NEXT:   func.func @main(
// CHECK-SAME:     %arg0: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}p2, {}]>}
// CHECK-SAME:     %arg1: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p1, {}]>}
// CHECK-SAME:     -> (tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p0, {}]>}, tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c"}, {}]>})
// CHECK-NEXT:     %0 = stablehlo.add %arg0, %arg1 : tensor<32x8xf32>
// CHECK-NEXT:     %1 = sdy.sharding_constraint %0 <@mesh, [{"a"}p2, {}]> : tensor<32x8xf32>
// CHECK-NEXT:     %2 = sdy.manual_computation(%1) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg2: tensor<16x8xf32>) {
// CHECK-NEXT:       %3 = stablehlo.abs %arg2 : tensor<16x8xf32>
// CHECK-NEXT:       sdy.return %3 : tensor<16x8xf32>
// CHECK-NEXT:     } : (tensor<32x8xf32>) -> tensor<32x8xf32>
// CHECK-NEXT:     return %2, %arg1 : tensor<32x8xf32>, tensor<32x8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }

// PLAN:      "meshes":[
// PLAN-NEXT:   {"name":"mesh","axes":[{"name":"a","size":2},{"name":"b","size":2},{"name":"c","size":2}],"devices":8}],
// PLAN:      "op":"sdy.manual_computation"
// PLAN:      "outputs":[
// PLAN-NEXT:   {"index":0,"type":"tensor<32x8xf32>","shape":[32,8],"sharding":{"text":"<@mesh, [{\"a\"}, {}]>"
// PLAN-NEXT:   {"index":1,"type":"tensor<32x8xf32>","shape":[32,8],"sharding":{"text":"<@mesh, [{\"c\"}, {}]>"
module @jit_f attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<[\22a\22=2, \22b\22=2, \22c\22=2]>}"}, mhlo.num_partitions = 8 : i32} {
  func.func @main(
    %arg0: tensor<32x8xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{\22b\22}p2, {}]>"}, mhlo.sharding = "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}"},
    %arg1: tensor<32x8xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{\22a\22}p1, {}]>"}}
  ) -> (tensor<32x8xf32>, tensor<32x8xf32>) {
    %0 = stablehlo.add %arg0, %arg1 {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{\22a\22}p1, {}]>]>"}} : tensor<32x8xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{\22a\22}p2, {}]>]>"}} : (tensor<32x8xf32>) -> tensor<32x8xf32>
    %2 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%1) {mhlo.frontend_attributes = {xla.sdy.in_shardings = "#sdy.sharding_per_value<[<@mesh, [{\22a\22}, {}]>]>", xla.sdy.manual_axes = "#sdy<manual_axes{\22a\22}>"}} : (tensor<32x8xf32>) -> tensor<16x8xf32>
    %3 = call @xla.sdy.manual_computation_body(%2) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %4 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%3) {mhlo.frontend_attributes = {xla.sdy.manual_axes = "#sdy<manual_axes{\22a\22}>", xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh, [{\22a\22}, {}]>]>"}} : (tensor<16x8xf32>) -> tensor<32x8xf32>
    %5 = stablehlo.custom_call @xla.sdy.FuncResultSharding(%4) {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{\22a\22}p0, {}]>]>"}} : (tensor<32x8xf32>) -> tensor<32x8xf32>
    %6 = stablehlo.custom_call @xla.sdy.FuncResultSharding(%arg1) {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{\22c\22}, {}]>]>"}} : (tensor<32x8xf32>) -> tensor<32x8xf32>
    return %5, %6 : tensor<32x8xf32>, tensor<32x8xf32>
  }
  func.func private @xla.sdy.manual_computation_body(%arg0: tensor<16x8xf32>) -> tensor<16x8xf32> {
    %0 = stablehlo.abs %arg0 : tensor<16x8xf32>
    return %0 : tensor<16x8xf32>
  }
}
